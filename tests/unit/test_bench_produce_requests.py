"""bench.produce_requests: the Java tool's output read, and the report's medians."""

from __future__ import annotations

from bench.produce_requests import _JAVA_PERCENTILES, _JAVA_REQUESTS, markdown

JAVA_OUTPUT = """\
100002 records sent, 20000.4 records/sec (19.53 MB/sec), 1.2 ms avg latency, 59.0 ms max latency.
400000 records sent, 19998.0 records/sec (19.53 MB/sec), 1.10 ms avg latency, 199.00 ms max \
latency, 1 ms 50th, 2 ms 95th, 59 ms 99th, 180 ms 99.9th.

Metric Name                                                          Value
producer-metrics:request-rate:{client-id=perf-producer-client}     : 18.412
producer-metrics:request-total:{client-id=perf-producer-client}    : 11260.000
"""


def test_the_java_tools_percentiles_and_request_total_are_read() -> None:
    assert _JAVA_PERCENTILES.findall(JAVA_OUTPUT)[-1] == ("1", "2", "59", "180")
    assert float(_JAVA_REQUESTS.findall(JAVA_OUTPUT)[-1]) == 11260.0


def test_each_producer_gets_the_median_of_its_runs() -> None:
    def run(requests: int, per_request: float) -> dict[str, float]:
        return {
            "requests_per_s": requests,
            "records_per_request": per_request,
            "p50_ms": 1.0,
            "p99_ms": 4.0,
        }

    report = {
        "rate": 20000,
        "size": 1024,
        "partitions": 8,
        "seconds": 20.0,
        "runs": {"librdkafka": [run(13099, 1.5), run(13542, 1.5), run(13040, 1.4)]},
    }

    assert "| librdkafka | 13,099 | 1.5 | 1.0 | 4.0 |" in markdown(report)
