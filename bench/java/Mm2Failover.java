// MirrorMaker 2's failover of consumer groups as its users script it: for each group,
// RemoteClusterUtils.translateOffsets (the group's checkpoints that MM2 wrote on the target)
// and an AdminClient commit of the translated offsets on the target, one group after another.
// MM2 has no command for it. Run with the Kafka distribution's libs on the class path:
//   java -cp 'libs/*' Mm2Failover.java <target bootstrap> <source alias> <file of groups>
// Prints one JSON line: seconds (this loop only, the JVM's start and compile not included),
// groups with offsets committed, partitions committed, groups without a checkpoint.

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class Mm2Failover {
    public static void main(String[] args) throws Exception {
        Map<String, Object> target = Map.of("bootstrap.servers", args[0]);
        String source = args[1];
        List<String> groups = Files.readAllLines(Path.of(args[2]));
        long began = System.nanoTime();
        int moved = 0;
        int empty = 0;
        long partitions = 0;
        try (Admin admin = Admin.create(target)) {
            for (String group : groups) {
                Map<TopicPartition, OffsetAndMetadata> offsets =
                        RemoteClusterUtils.translateOffsets(
                                target, source, group, Duration.ofSeconds(60));
                if (offsets.isEmpty()) {
                    empty++;
                    continue;
                }
                admin.alterConsumerGroupOffsets(group, offsets).all().get();
                moved++;
                partitions += offsets.size();
            }
        }
        double seconds = (System.nanoTime() - began) / 1e9;
        System.out.printf(
                "{\"seconds\": %.2f, \"groups_moved\": %d, \"partitions\": %d, "
                        + "\"groups_without_checkpoints\": %d}%n",
                seconds, moved, partitions, empty);
    }
}
