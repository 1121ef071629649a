"""How many bins (Spark tasks) a batch gets: one per MIN_BIN_BYTES of estimated bytes."""

from __future__ import annotations

from ferry.engine.plan.batches import MIN_BIN_BYTES, PartitionRange, bin_count, lease_bins


def ranges(*counts: int) -> list[PartitionRange]:
    return [PartitionRange("t", p, 0, n, "A.t") for p, n in enumerate(counts)]


def test_a_small_batch_is_one_bin() -> None:
    assert bin_count(ranges(10, 10, 10), 8, record_bytes={}) == 1


def test_an_empty_batch_is_still_one_bin() -> None:
    assert bin_count([], 4, record_bytes={}) == 1


def test_one_bin_per_min_bin_bytes_up_to_the_maximum() -> None:
    one_bin = MIN_BIN_BYTES // 1024  # records of the default estimate, 1 KiB
    assert bin_count(ranges(one_bin), 8, record_bytes={}) == 1
    assert bin_count(ranges(one_bin, 1), 8, record_bytes={}) == 2
    assert bin_count(ranges(*[one_bin] * 3), 8, record_bytes={}) == 3
    assert bin_count(ranges(*[one_bin] * 20), 8, record_bytes={}) == 8


def test_record_sizes_copied_so_far_count() -> None:
    big = {("t", 0): 1024.0 * 1024}  # 1 MiB records
    assert bin_count(ranges(40), 2, record_bytes=big) == 2
    assert bin_count(ranges(40), 2, record_bytes={("t", 0): 10.0}) == 1


def test_a_range_starting_at_earliest_counts_from_zero() -> None:
    earliest = [PartitionRange("t", 0, -2, 3 * MIN_BIN_BYTES // 1024, "A.t")]
    assert bin_count(earliest, 4, record_bytes={}) == 3


def test_a_lease_never_has_more_bins_than_spark_has_slots() -> None:
    assert lease_bins(4, 2, 1) == 1  # a worker of two was lost: one bin copies everything
    assert lease_bins(2, 2, 2) == 2
    assert lease_bins(2, 2, 6) == 2  # more slots than ferry.bins: ferry.bins


def test_without_ferry_bins_a_lease_has_a_bin_per_slot_there_is_now() -> None:
    assert lease_bins(0, 1, 2) == 2  # one executor at the start, two now
    assert lease_bins(0, 2, 1) == 1


def test_a_lease_before_the_slots_were_counted_has_the_bins_of_the_start() -> None:
    assert lease_bins(3, 2, None) == 3
    assert lease_bins(0, 2, None) == 2
    assert lease_bins(0, 0, None) == 1
