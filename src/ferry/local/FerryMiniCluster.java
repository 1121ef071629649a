// `ferry local yarn up`'s JVM: a MiniDFSCluster and a MiniYARNCluster (Hadoop's own test
// clusters, from hadoop-client-minicluster) in one process, on 127.0.0.1.
//
// Run as a single source file (Java 11+ compiles it in memory, no build step):
//   java -cp '<libs>/*' FerryMiniCluster.java CONF_DIR DATA_DIR NAMENODE_PORT NODE_MANAGERS \
//        READY_FILE [key=value ...]
// The key=value pairs go into the clusters' configuration (NodeManager memory and vcores, ...).
// Once HDFS and every NodeManager are up it writes CONF_DIR/{core,hdfs,yarn}-site.xml (what
// HADOOP_CONF_DIR points at) and then READY_FILE (JSON), and runs until SIGTERM, which stops
// YARN and then HDFS.

import java.io.FileOutputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Map;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

public class FerryMiniCluster {
  public static void main(String[] args) {
    try {
      start(args);
    } catch (Throwable e) {
      // HDFS's threads would keep the JVM alive after a failed start: end it, said in the log.
      e.printStackTrace();
      System.exit(1);
    }
  }

  private static void start(String[] args) throws Exception {
    Path confDir = Paths.get(args[0]);
    Path dataDir = Paths.get(args[1]);
    int namenodePort = Integer.parseInt(args[2]);
    int nodeManagers = Integer.parseInt(args[3]);
    Path ready = Paths.get(args[4]);

    Configuration conf = new YarnConfiguration();
    conf.set("hadoop.tmp.dir", dataDir.resolve("tmp").toString());
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, dataDir.resolve("hdfs").toString());
    for (int i = 5; i < args.length; i++) {
      int eq = args[i].indexOf('=');
      conf.set(args[i].substring(0, eq), args[i].substring(eq + 1));
    }

    MiniDFSCluster dfs =
        new MiniDFSCluster.Builder(conf)
            .nameNodePort(namenodePort)
            .numDataNodes(1)
            .format(true)
            .build();
    dfs.waitActive();
    String fs = "hdfs://127.0.0.1:" + dfs.getNameNodePort();
    conf.set("fs.defaultFS", fs);

    MiniYARNCluster yarn = new MiniYARNCluster("ferry", nodeManagers, 1, 1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  try {
                    yarn.stop();
                  } finally {
                    dfs.shutdown();
                  }
                }));
    yarn.init(conf);
    yarn.start();
    if (!yarn.waitForNodeManagersToConnect(120_000)) {
      throw new IllegalStateException(nodeManagers + " NodeManagers did not register in 120 s");
    }
    Configuration started = yarn.getConfig();

    Map<String, String> core = new TreeMap<>();
    core.put("fs.defaultFS", fs);
    Map<String, String> hdfs = new TreeMap<>();
    hdfs.put("dfs.replication", "1");
    Map<String, String> site = new TreeMap<>();
    for (String key :
        new String[] {
          YarnConfiguration.RM_ADDRESS,
          YarnConfiguration.RM_SCHEDULER_ADDRESS,
          YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS,
          YarnConfiguration.RM_ADMIN_ADDRESS,
          YarnConfiguration.RM_WEBAPP_ADDRESS,
          "yarn.scheduler.minimum-allocation-mb",
          "yarn.scheduler.maximum-allocation-mb",
        }) {
      site.put(key, started.get(key));
    }
    write(confDir.resolve("core-site.xml"), core);
    write(confDir.resolve("hdfs-site.xml"), hdfs);
    write(confDir.resolve("yarn-site.xml"), site);

    String json =
        "{\"hdfs\": \""
            + fs
            + "\", \"resourcemanager\": \""
            + started.get(YarnConfiguration.RM_ADDRESS)
            + "\", \"webapp\": \""
            + started.get(YarnConfiguration.RM_WEBAPP_ADDRESS)
            + "\", \"nodemanagers\": "
            + nodeManagers
            + "}\n";
    Path tmp = Paths.get(ready + ".tmp");
    Files.write(tmp, json.getBytes(StandardCharsets.UTF_8));
    Files.move(tmp, ready, StandardCopyOption.ATOMIC_MOVE);
    System.out.println("ferry minicluster ready: " + json.trim());
    Thread.currentThread().join();
  }

  private static void write(Path file, Map<String, String> values) throws Exception {
    Configuration out = new Configuration(false);
    values.forEach(out::set);
    Path tmp = Paths.get(file + ".tmp");
    try (OutputStream stream = new FileOutputStream(tmp.toFile())) {
      out.writeXml(stream);
    }
    Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
  }
}
