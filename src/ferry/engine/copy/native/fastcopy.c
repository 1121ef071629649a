/*
 * ferry.engine._fastcopy: the copy loop of one Spark task, in C over librdkafka.
 *
 * Same contract as the Python loop in python_loop.py (which stays the reference and the
 * fallback): consume exact source offset ranges, produce faithful copies to the same
 * partition number of the remote topic (key, value or tombstone, headers in order,
 * timestamp), add the `ferry.origin` header unless the record has one, skip records whose
 * origin is the target cluster (loop prevention), and return exact offset runs built from
 * delivery reports only. Nothing is reported copied unless the target acknowledged it.
 *
 * Why C: in Python every record costs a Message object, bytes copies of key and value, a
 * headers list and a produce() call (about 10 us of CPU per record); here a record costs a
 * header append and a producev() call, and every delivery report is paired with its source
 * offset (carried as the message opaque), so runs are exact per record at no extra cost.
 *
 * The GIL is released for the whole copy; the delivery callback touches no Python object.
 * Errors are returned as a tuple and turned into ferry's errors by native_loop.py, so the
 * wording stays in one place (errors.py).
 *
 * librdkafka is not linked: its symbols resolve at import against the library
 * confluent-kafka loaded (native_loop.py makes it global first).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rdkafka.h"

#define CONSUME_BATCH 5000
#define SIZE_CHECK_MARGIN 8192
#define NEW_PARTITION_WAIT_MS 30000
#define MAX_BUCKETS 32
static const char ORIGIN_HEADER[] = "ferry.origin";

/* ---------------------------------------------------------------- small helpers */

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* Bytes of a zigzag varint (Kafka's record encoding); see record_size.py. */
static int64_t varint_size(int64_t value) {
    uint64_t zigzag = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    int64_t size = 1;
    while (zigzag >= 0x80) {
        zigzag >>= 7;
        size++;
    }
    return size;
}

static int64_t bytes_field(const void *data, size_t len) {
    if (data == NULL) return varint_size(-1);
    return varint_size((int64_t)len) + (int64_t)len;
}

/* Uncompressed size of a v2 batch holding only this record: record_size.py, in C. */
static int64_t single_record_batch_size(const void *key, size_t key_len, const void *value,
                                        size_t value_len, const rd_kafka_headers_t *hdrs) {
    int64_t body = 1 + varint_size(0) + varint_size(0);
    size_t count = hdrs ? rd_kafka_header_cnt(hdrs) : 0;
    body += bytes_field(key, key_len) + bytes_field(value, value_len);
    body += varint_size((int64_t)count);
    for (size_t i = 0; i < count; i++) {
        const char *name;
        const void *data;
        size_t size;
        if (rd_kafka_header_get_all(hdrs, i, &name, &data, &size)) break;
        body += bytes_field(name, strlen(name)) + bytes_field(data, size);
    }
    return 61 + varint_size(body) + body;
}

/* The origin header's longest value: its fixed parts are checked against this up front. */
#define ORIGIN_MAX 1200

typedef struct {
    int64_t counts[MAX_BUCKETS + 1];
    double sum;
} Histogram;

/* ---------------------------------------------------------------- one copy job */

typedef struct {
    /* what to copy */
    char *topic;
    int32_t partition;
    int64_t start, end;
    char *remote_topic;
    rd_kafka_topic_t *remote_rkt; /* the producer's handle, owned by the Copier */
    int64_t max_message_bytes;
    char *origin_before, *origin_after;
    size_t before_len, after_len;
    const rd_kafka_topic_t *source_rkt; /* the consumer's handle, learned from a message */
    /* progress */
    int active;
    int64_t cursor;
    int64_t copied, skipped, bytes, expired, produced, delivered;
    int64_t lost_first, lost_last; /* the offsets of the `expired` records, -1: none */
    int64_t acked_next; /* the source offset after the last acknowledged copy, -1: none */
    /* exact runs (upstream start, downstream start, count), from delivery reports */
    int64_t *runs;
    size_t nruns, runs_cap;
    int64_t run_up, run_down, run_count;
    Histogram age, latency;
    /* the first refused copy */
    int64_t failed, failed_upstream;
    rd_kafka_resp_err_t failed_code;
    int failed_fatal;
    char failed_reason[512];
} Range;

/* `<before><offset><after>` (provenance.py's Origin.to_bytes) without printf: it ran for
 * every copy and showed in profiles. The fixed parts fit ORIGIN_MAX (checked in copy()). */
static size_t format_origin(char *out, const Range *r, int64_t offset) {
    char digits[24];
    size_t n = 0, len = r->before_len;
    uint64_t v = offset > 0 ? (uint64_t)offset : 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    memcpy(out, r->origin_before, r->before_len);
    while (n) out[len++] = digits[--n];
    memcpy(out + len, r->origin_after, r->after_len);
    return len + r->after_len;
}

typedef struct {
    Range *ranges;
    size_t n;
    const char *own_origin;
    size_t own_origin_len;
    const int *unreachable;
    size_t n_unreachable;
    int64_t stall_ms;
    int64_t deadline_ms; /* a lease's slice: stop consuming at this mono_ms() (0: at the ends) */
    int continuing;      /* the consumer is assigned at these positions already (a lease) */
    int settle;          /* a slice waits for the acks of its copies (else they carry over) */
    /* ferry run is stopping: a Python callable (or NULL), asked at most once a second; a wait
     * for acks then gives up after stop_grace_ms without one, else after ack_timeout_ms
     * (engine/copy/ack_wait.py) */
    PyObject *stopping;
    int64_t stop_grace_ms, stop_asked_ms, ack_timeout_ms;
    int stop_seen;
    const double *buckets;
    size_t n_buckets;
    int64_t sample_mask;
    size_t last_source, last_remote; /* lookup caches */
    /* the error that ended the copy, if any */
    const char *error_kind;
    long error_range;
    char error_topic[512];
    int32_t error_partition;
    int64_t error_offset;
    rd_kafka_resp_err_t error_code;
    int error_fatal, error_abort;
    int64_t error_extra;
    char error_reason[512];
} Job;

static void observe(Job *job, Histogram *h, double ms) {
    size_t i = 0;
    while (i < job->n_buckets && job->buckets[i] < ms) i++; /* bisect_left */
    h->counts[i]++;
    h->sum += ms;
}

static int run_close(Range *r) {
    if (!r->run_count) return 0;
    if (r->nruns == r->runs_cap) {
        size_t cap = r->runs_cap ? r->runs_cap * 2 : 16;
        int64_t *grown = realloc(r->runs, cap * 3 * sizeof(int64_t));
        if (!grown) return -1;
        r->runs = grown;
        r->runs_cap = cap;
    }
    r->runs[r->nruns * 3] = r->run_up;
    r->runs[r->nruns * 3 + 1] = r->run_down;
    r->runs[r->nruns * 3 + 2] = r->run_count;
    r->nruns++;
    r->run_count = 0;
    return 0;
}

/* RunBuilder.add of kafka/offset_runs.py. Returns -1 when out of memory. */
static int run_add(Range *r, int64_t upstream, int64_t downstream) {
    if (r->run_count && upstream == r->run_up + r->run_count &&
        downstream == r->run_down + r->run_count) {
        r->run_count++;
        return 0;
    }
    if (run_close(r)) return -1;
    r->run_up = upstream;
    r->run_down = downstream;
    r->run_count = 1;
    return 0;
}

static void set_error(Job *job, const char *kind, long range, const char *topic,
                      int32_t partition, int64_t offset, rd_kafka_resp_err_t code,
                      const char *reason) {
    job->error_kind = kind;
    job->error_range = range;
    snprintf(job->error_topic, sizeof job->error_topic, "%s", topic ? topic : "");
    job->error_partition = partition;
    job->error_offset = offset;
    job->error_code = code;
    snprintf(job->error_reason, sizeof job->error_reason, "%s", reason ? reason : "");
}

/* Whether ferry run is stopping: the job's callable, asked with the GIL (this runs with it
 * released) at most once a second. */
static int stop_requested(Job *job) {
    if (!job->stopping) return 0;
    int64_t now = mono_ms();
    if (job->stop_asked_ms && now - job->stop_asked_ms < 1000) return job->stop_seen;
    job->stop_asked_ms = now;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *answer = PyObject_CallNoArgs(job->stopping);
    job->stop_seen = answer != NULL && PyObject_IsTrue(answer) == 1;
    Py_XDECREF(answer);
    PyErr_Clear(); /* a stop that cannot be asked is no stop */
    PyGILState_Release(gil);
    return job->stop_seen;
}

/* AckWait of engine/copy/ack_wait.py: the copies are waited for while the target
 * acknowledges some (message.timeout.ms = 0: librdkafka never gives one up, which would let
 * later copies of its partition land first); the batch is given up whole when none was
 * acknowledged for ack_timeout_ms, or for stop_grace_ms once ferry run is stopping. */
typedef struct {
    int64_t acked_at;   /* the last acknowledgement seen (or the first look) */
    int64_t stopped_at; /* when the stop was first seen (0: not yet) */
    int outstanding;    /* -1: not looked yet */
} AckWait;

/* 0: wait on; else the error kind ("stopped" or "unacknowledged") with `*silent_ms` set. */
static const char *ack_wait_gives_up(Job *job, AckWait *wait, int outstanding,
                                     int64_t *silent_ms) {
    int64_t now = mono_ms();
    if (wait->outstanding < 0 || outstanding < wait->outstanding) wait->acked_at = now;
    wait->outstanding = outstanding;
    *silent_ms = now - wait->acked_at;
    if (stop_requested(job)) {
        if (!wait->stopped_at) wait->stopped_at = now;
        int64_t since = wait->acked_at > wait->stopped_at ? wait->acked_at : wait->stopped_at;
        if (now - since >= job->stop_grace_ms) return "stopped";
    }
    return *silent_ms >= job->ack_timeout_ms ? "unacknowledged" : 0;
}

/* ---------------------------------------------------------------- the Copier object */

typedef struct {
    PyObject_HEAD rd_kafka_t *consumer;
    rd_kafka_queue_t *queue;
    rd_kafka_t *producer;
    /* the producer's topic handles, by remote topic name */
    rd_kafka_topic_t **rkts;
    size_t n_rkts, rkts_cap;
    Job *job; /* set while copying: the delivery callback's context */
    int busy;
    int broken; /* a copy failed: the owner must drop this copier */
} Copier;

static Range *find_remote(Job *job, const rd_kafka_topic_t *rkt, int32_t partition) {
    Range *r = &job->ranges[job->last_remote];
    if (r->remote_rkt == rkt && r->partition == partition) return r;
    for (size_t i = 0; i < job->n; i++) {
        r = &job->ranges[i];
        if (r->remote_rkt == rkt && r->partition == partition) {
            job->last_remote = i;
            return r;
        }
    }
    return NULL;
}

static Range *find_source(Job *job, const rd_kafka_message_t *m) {
    if (m->rkt == NULL || job->n == 0) return NULL;
    Range *r = &job->ranges[job->last_source];
    if (r->source_rkt == m->rkt && r->partition == m->partition) return r;
    const char *name = NULL;
    for (size_t i = 0; i < job->n; i++) {
        r = &job->ranges[i];
        if (r->partition != m->partition) continue;
        if (r->source_rkt == NULL) {
            if (name == NULL) name = rd_kafka_topic_name(m->rkt);
            if (strcmp(name, r->topic) != 0) continue;
            r->source_rkt = m->rkt; /* stable while the consumer lives */
        } else if (r->source_rkt != m->rkt) {
            continue;
        }
        job->last_source = i;
        return r;
    }
    return NULL;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    Copier *self = opaque;
    Job *job = self->job;
    if (job == NULL) return; /* a report of a purged earlier copy: nobody waits for it */
    Range *r = find_remote(job, m->rkt, m->partition);
    if (r == NULL) return;
    int64_t upstream = (int64_t)(intptr_t)m->_private;
    r->delivered++;
    if (m->err) {
        if (!r->failed) {
            r->failed_upstream = upstream;
            r->failed_code = m->err;
            snprintf(r->failed_reason, sizeof r->failed_reason, "%s", rd_kafka_err2str(m->err));
            r->failed_fatal = rd_kafka_fatal_error(rk, NULL, 0) != RD_KAFKA_RESP_ERR_NO_ERROR;
        }
        r->failed++;
        return;
    }
    r->acked_next = upstream + 1;
    if (run_add(r, upstream, m->offset)) {
        r->failed++; /* out of memory: the runs are incomplete, so the batch must fail */
        r->failed_code = RD_KAFKA_RESP_ERR__FAIL;
        r->failed_upstream = upstream;
        snprintf(r->failed_reason, sizeof r->failed_reason, "out of memory");
        return;
    }
    if (!(upstream & job->sample_mask)) {
        int64_t ts = rd_kafka_message_timestamp(m, NULL);
        if (ts > 0) observe(job, &r->latency, wall_ms() - (double)ts);
    }
}

static int is_unreachable(Job *job, rd_kafka_resp_err_t code) {
    for (size_t i = 0; i < job->n_unreachable; i++)
        if (job->unreachable[i] == (int)code) return 1;
    return 0;
}

static void finish(rd_kafka_topic_partition_list_t *finished, Range *r, size_t *active) {
    r->active = 0;
    (*active)--;
    /* Not pause(): librdkafka keeps a partition paused across assign(), so the next task of
     * this (cached) consumer would never receive it. Unassigned together, once per batch. */
    rd_kafka_topic_partition_list_add(finished, r->topic, r->partition);
}

/* Retention deleted records not copied yet: count them (`expired`), go on from the oldest. */
static int skip_expired(Copier *self, Job *job, Range *r) {
    int64_t low = 0, high = 0;
    rd_kafka_resp_err_t err =
        rd_kafka_query_watermark_offsets(self->consumer, r->topic, r->partition, &low, &high,
                                         10000);
    if (err) {
        set_error(job, "unavailable", r - job->ranges, r->topic, r->partition, r->cursor, err,
                  rd_kafka_err2str(err));
        return -1;
    }
    /* A position beyond the end: the topic was deleted and created again (or its log was
     * truncated). Copying on from it would skip the new topic's first records: stop, so the
     * retry starts the new topic from its beginning. */
    if (r->cursor > high) {
        set_error(job, "recreated", r - job->ranges, r->topic, r->partition, r->cursor,
                  RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET, "");
        job->error_extra = high;
        return -1;
    }
    int64_t upto = low < r->end ? low : r->end;
    if (upto > r->cursor) {
        r->expired += upto - r->cursor;
        if (r->lost_first < 0) r->lost_first = r->cursor;
        r->lost_last = upto - 1;
    }
    if (low > r->cursor) r->cursor = low;
    /* Not a seek: after an offset-reset error the partition's fetcher is in an error state
     * and librdkafka refuses to seek it (_STATE); assigning it afresh restarts its fetcher. */
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, r->topic, r->partition);
    rd_kafka_error_t *error = rd_kafka_incremental_unassign(self->consumer, parts);
    if (!error) {
        parts->elems[0].offset = r->cursor;
        error = rd_kafka_incremental_assign(self->consumer, parts);
    }
    rd_kafka_topic_partition_list_destroy(parts);
    if (error) {
        set_error(job, "unavailable", r - job->ranges, r->topic, r->partition, r->cursor,
                  rd_kafka_error_code(error), rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
        return -1;
    }
    return 0;
}

/* What is fetched already, or else the first message within 100 ms or by the slice's end
 * (consume_batch waits for a full batch or the whole timeout, so the tail of every range
 * would cost it). */
static ssize_t next_messages(Copier *self, Job *job, rd_kafka_message_t **msgs) {
    ssize_t n = rd_kafka_consume_batch_queue(self->queue, 0, msgs, CONSUME_BATCH);
    if (n != 0) return n;
    int wait_ms = 100;
    if (job->deadline_ms) {
        int64_t left = job->deadline_ms - mono_ms();
        wait_ms = left <= 0 ? 0 : left < 100 ? (int)left : 100;
    }
    rd_kafka_message_t *first = rd_kafka_consumer_poll(self->consumer, wait_ms);
    if (first == NULL) return 0;
    msgs[0] = first;
    n = rd_kafka_consume_batch_queue(self->queue, 0, msgs + 1, CONSUME_BATCH - 1);
    return n < 0 ? 1 : n + 1;
}

/* Produce one copy; on success librdkafka owns `hdrs`. */
static int produce(Copier *self, Job *job, Range *r, rd_kafka_message_t *m,
                   rd_kafka_headers_t *hdrs, int64_t timestamp) {
    int64_t metadata_wait = 0;
    AckWait full = {0, 0, -1}; /* a full queue that does not drain */
    for (;;) {
        rd_kafka_resp_err_t err = rd_kafka_producev(
            self->producer, RD_KAFKA_V_RKT(r->remote_rkt), RD_KAFKA_V_PARTITION(r->partition),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_VALUE(m->payload, m->len),
            RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_TIMESTAMP(timestamp),
            RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE((void *)(intptr_t)m->offset),
            RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            r->produced++;
            return 0;
        }
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(self->producer, 50); /* let deliveries drain */
            int outstanding = rd_kafka_outq_len(self->producer);
            int64_t silent_ms;
            const char *kind = ack_wait_gives_up(job, &full, outstanding, &silent_ms);
            if (!kind) continue;
            rd_kafka_headers_destroy(hdrs);
            set_error(job, kind, r - job->ranges, r->topic, r->partition, silent_ms, err, "");
            job->error_extra = outstanding;
            return -1;
        }
        int64_t now = mono_ms();
        if (err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION) {
            /* A partition the planner added a moment ago: this cached producer's metadata
             * predates it. Refresh it and retry, for a bounded time. */
            if (!metadata_wait) metadata_wait = now + NEW_PARTITION_WAIT_MS;
            if (now < metadata_wait) {
                const struct rd_kafka_metadata *md = NULL;
                if (!rd_kafka_metadata(self->producer, 0, r->remote_rkt, &md, 1000) && md)
                    rd_kafka_metadata_destroy(md);
                struct timespec pause = {0, 100 * 1000000};
                nanosleep(&pause, NULL);
                continue;
            }
        }
        char reason[512];
        snprintf(reason, sizeof reason, "%s", rd_kafka_err2str(err));
        if (err == RD_KAFKA_RESP_ERR__FATAL) {
            err = rd_kafka_fatal_error(self->producer, reason, sizeof reason);
            job->error_fatal = 1;
        }
        rd_kafka_headers_destroy(hdrs);
        set_error(job, "produce", r - job->ranges, r->topic, r->partition, m->offset, err,
                  reason);
        return -1;
    }
}

/* One consumed message: copy it, or account for it. Returns -1 on an error that ends the
 * copy (the job holds it). */
static int handle(Copier *self, Job *job, rd_kafka_message_t *m, double now_ms,
                  rd_kafka_topic_partition_list_t *finished, size_t *active, int *got_data,
                  int64_t *last_progress) {
    Range *r = find_source(job, m);
    if (m->err) {
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            *last_progress = mono_ms();
            /* End of the committed log: nothing more can arrive inside this range. */
            if (r && r->active && m->offset >= r->end) finish(finished, r, active);
            /* An open range (a lease) stands at the log's end: past transaction markers too.
             * librdkafka drops events of an earlier assignment, so this one is current. */
            if (r && r->active && r->end == INT64_MAX && m->offset > r->cursor)
                r->cursor = m->offset;
            return 0;
        }
        if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET && r && r->active) {
            if (skip_expired(self, job, r)) return -1;
            *last_progress = mono_ms();
            return 0;
        }
        if (is_unreachable(job, m->err)) return 0; /* librdkafka retries these */
        set_error(job, "consume", r ? r - job->ranges : -1,
                  m->rkt ? rd_kafka_topic_name(m->rkt) : "?", m->partition, m->offset, m->err,
                  rd_kafka_message_errstr(m));
        job->error_fatal = m->err == RD_KAFKA_RESP_ERR__FATAL;
        return -1;
    }
    if (r == NULL || !r->active) return 0;
    /* Only data counts as progress: librdkafka repeats transient error events, and a source
     * that sends nothing else must still reach the stall timeout. */
    *got_data = 1;
    int64_t offset = m->offset;
    if (offset < r->cursor) return 0; /* already seen (a stale prefetch of a reused consumer) */
    if (offset >= r->end) {
        finish(finished, r, active);
        return 0;
    }
    r->cursor = offset + 1;

    rd_kafka_headers_t *hdrs = NULL;
    rd_kafka_resp_err_t herr = rd_kafka_message_detach_headers(m, &hdrs);
    if (herr != RD_KAFKA_RESP_ERR_NO_ERROR && herr != RD_KAFKA_RESP_ERR__NOENT) {
        set_error(job, "consume", r - job->ranges, r->topic, r->partition, offset, herr,
                  "the record's headers could not be parsed");
        return -1;
    }
    if (herr == RD_KAFKA_RESP_ERR__NOENT) hdrs = NULL;
    const void *origin = NULL;
    size_t origin_len = 0;
    int has_origin = hdrs && rd_kafka_header_get(hdrs, 0, ORIGIN_HEADER, &origin,
                                                 &origin_len) == RD_KAFKA_RESP_ERR_NO_ERROR;
    if (has_origin && origin && origin_len >= job->own_origin_len &&
        memcmp(origin, job->own_origin, job->own_origin_len) == 0) {
        r->skipped++; /* it came from the target: copying it back would loop */
        rd_kafka_headers_destroy(hdrs);
        if (offset == r->end - 1) finish(finished, r, active);
        return 0;
    }
    if (!has_origin) {
        char value[ORIGIN_MAX];
        size_t len = format_origin(value, r, offset);
        if (hdrs == NULL) hdrs = rd_kafka_headers_new(1);
        rd_kafka_header_add(hdrs, ORIGIN_HEADER, sizeof ORIGIN_HEADER - 1, value, (ssize_t)len);
    }
    int64_t payload = (int64_t)m->key_len + (int64_t)m->len;
    int64_t size = payload;
    size_t count = rd_kafka_header_cnt(hdrs);
    for (size_t i = 0; i < count; i++) {
        const char *name;
        const void *data;
        size_t data_len;
        if (rd_kafka_header_get_all(hdrs, i, &name, &data, &data_len)) break;
        size += (int64_t)strlen(name) + (int64_t)data_len;
    }
    if (size + SIZE_CHECK_MARGIN > r->max_message_bytes) {
        int64_t exact = single_record_batch_size(m->key, m->key_len, m->payload, m->len, hdrs);
        if (exact > r->max_message_bytes) {
            rd_kafka_headers_destroy(hdrs);
            set_error(job, "size", r - job->ranges, r->topic, r->partition, offset, 0, "");
            job->error_extra = exact;
            return -1;
        }
    }
    int64_t timestamp = rd_kafka_message_timestamp(m, NULL);
    if (timestamp > 0 && !(offset & job->sample_mask))
        observe(job, &r->age, now_ms - (double)timestamp);
    if (produce(self, job, r, m, hdrs, timestamp >= 0 ? timestamp : 0)) return -1;
    r->copied++;
    r->bytes += payload;
    if (offset == r->end - 1) finish(finished, r, active);
    return 0;
}

static void unassign_finished(Copier *self, rd_kafka_topic_partition_list_t *finished) {
    if (finished->cnt == 0) return;
    rd_kafka_error_t *error = rd_kafka_incremental_unassign(self->consumer, finished);
    if (error) rd_kafka_error_destroy(error); /* the final unassign() drops them anyway */
    /* empty the list for the next batch */
    while (finished->cnt > 0)
        rd_kafka_topic_partition_list_del_by_idx(finished, finished->cnt - 1);
}

/* The copy itself, without the GIL. Returns 0 when every copy was acknowledged. */
/* After the copy: the first refused copy fails the job; otherwise every range's last run is
 * closed. `all_acked`: every copy must have been reported (the flush returned). Returns 1 on
 * failure (the job's error set), else 0. */
static int report_ranges(Job *job, int all_acked) {
    for (size_t i = 0; i < job->n; i++) {
        Range *r = &job->ranges[i];
        if (r->failed) {
            set_error(job, "delivery", (long)i, r->remote_topic, r->partition,
                      r->failed_upstream, r->failed_code, r->failed_reason);
            job->error_fatal = r->failed_fatal;
            job->error_extra = r->failed;
            return 1;
        }
        if (all_acked && r->delivered != r->produced) {
            /* Cannot happen if librdkafka reports every message; if it did, the runs would
             * be incomplete: fail the batch rather than commit a guess. */
            set_error(job, "unaccounted", (long)i, r->remote_topic, r->partition, r->start,
                      RD_KAFKA_RESP_ERR__FAIL, "");
            job->error_extra = r->produced - r->delivered;
            return 1;
        }
        run_close(r);
    }
    return 0;
}

static int run_copy(Copier *self, Job *job) {
    rd_kafka_message_t **msgs = malloc(sizeof(*msgs) * CONSUME_BATCH);
    rd_kafka_topic_partition_list_t *assignment = rd_kafka_topic_partition_list_new((int)job->n);
    rd_kafka_topic_partition_list_t *finished = rd_kafka_topic_partition_list_new((int)job->n);
    size_t active = 0;
    int failed = 0;
    if (!msgs || !assignment || !finished) {
        set_error(job, "memory", -1, "", -1, -1, RD_KAFKA_RESP_ERR__FAIL, "out of memory");
        failed = 1;
        goto done;
    }
    for (size_t i = 0; i < job->n; i++) {
        Range *r = &job->ranges[i];
        r->active = r->end > r->start;
        r->cursor = r->start > 0 ? r->start : 0;
        if (!r->active) continue;
        rd_kafka_topic_partition_list_add(assignment, r->topic, r->partition)->offset = r->start;
        active++;
    }
    if (active && !job->continuing) {
        rd_kafka_resp_err_t err = rd_kafka_assign(self->consumer, assignment);
        if (err) {
            set_error(job, "unavailable", -1, "", -1, -1, err, rd_kafka_err2str(err));
            failed = 1;
            goto done;
        }
    }
    int64_t last_progress = mono_ms();
    while (active && !failed && !(job->deadline_ms && mono_ms() >= job->deadline_ms)) {
        unassign_finished(self, finished);
        ssize_t n = next_messages(self, job, msgs);
        rd_kafka_poll(self->producer, 0);
        if (n <= 0) {
            if (mono_ms() - last_progress > job->stall_ms) {
                for (size_t i = 0; i < job->n; i++) {
                    if (!job->ranges[i].active) continue;
                    set_error(job, "stall", (long)i, job->ranges[i].topic,
                              job->ranges[i].partition, job->ranges[i].cursor, 0, "");
                    job->error_extra = (int64_t)active;
                    break;
                }
                failed = 1;
            }
            continue;
        }
        double now_ms = wall_ms();
        int got_data = 0;
        for (ssize_t i = 0; i < n; i++) {
            if (!failed && handle(self, job, msgs[i], now_ms, finished, &active, &got_data,
                                  &last_progress))
                failed = 1;
            rd_kafka_message_destroy(msgs[i]);
        }
        if (got_data) last_progress = mono_ms();
    }
    if (!failed && job->deadline_ms && !job->settle) {
        /* A lease's slice that does not wait: copies still in flight carry over to the next
         * slice (it serves their reports); what is reported now is what was acknowledged. */
        rd_kafka_poll(self->producer, 0);
        failed = report_ranges(job, 0);
        goto done;
    }
    if (failed) {
        /* Nothing of this batch is reported; drop what is still queued, quickly. */
        rd_kafka_purge(self->producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_flush(self->producer, 5000);
        goto done;
    }
    /* Wait until the target acknowledged (or refused) every copy, or give the batch up
     * whole (ack_wait_gives_up): nothing of it is reported, its copies are purged. */
    AckWait acks = {0, 0, -1};
    while (rd_kafka_flush(self->producer, 1000) == RD_KAFKA_RESP_ERR__TIMED_OUT) {
        int outstanding = rd_kafka_outq_len(self->producer);
        int64_t silent_ms;
        const char *kind = ack_wait_gives_up(job, &acks, outstanding, &silent_ms);
        if (!kind) continue;
        set_error(job, kind, -1, "", 0, silent_ms, RD_KAFKA_RESP_ERR__TIMED_OUT, "");
        job->error_extra = outstanding;
        rd_kafka_purge(self->producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_flush(self->producer, 5000);
        failed = 1;
        goto done;
    }
    failed = report_ranges(job, 1);
done:
    /* A lease's slice keeps the assignment (and what was fetched) for the next slice. */
    if (failed || !job->deadline_ms) rd_kafka_assign(self->consumer, NULL);
    if (finished) rd_kafka_topic_partition_list_destroy(finished);
    if (assignment) rd_kafka_topic_partition_list_destroy(assignment);
    free(msgs);
    return failed ? -1 : 0;
}

/* ---------------------------------------------------------------- Python glue */

static rd_kafka_conf_t *conf_from(PyObject *settings, const char *role) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* No log lines: librdkafka's default prints every refused connection to stderr (a Spark
     * worker's stderr reaches the console). What matters ends the copy as an error ferry
     * words itself; the Python clients' lines go to Python logging instead. */
    rd_kafka_conf_set_log_cb(conf, NULL);
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    char errstr[512];
    if (!PyDict_Check(settings)) {
        PyErr_Format(PyExc_TypeError, "%s settings must be a dict", role);
        goto fail;
    }
    while (PyDict_Next(settings, &pos, &key, &value)) {
        const char *k = PyUnicode_AsUTF8(key);
        if (!k || !PyUnicode_Check(value)) {
            PyErr_Format(PyExc_TypeError, "%s setting %R must be a string", role, key);
            goto fail;
        }
        const char *v = PyUnicode_AsUTF8(value);
        if (!v) goto fail;
        if (rd_kafka_conf_set(conf, k, v, errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
            PyErr_Format(PyExc_ValueError, "%s setting %s: %s", role, k, errstr);
            goto fail;
        }
    }
    return conf;
fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

static void Copier_release(Copier *self) {
    for (size_t i = 0; i < self->n_rkts; i++) rd_kafka_topic_destroy(self->rkts[i]);
    free(self->rkts);
    self->rkts = NULL;
    self->n_rkts = self->rkts_cap = 0;
    if (self->queue) rd_kafka_queue_destroy(self->queue);
    self->queue = NULL;
    if (self->consumer) {
        rd_kafka_consumer_close(self->consumer);
        rd_kafka_destroy(self->consumer);
    }
    self->consumer = NULL;
    if (self->producer) {
        rd_kafka_purge(self->producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_flush(self->producer, 0);
        rd_kafka_destroy(self->producer);
    }
    self->producer = NULL;
}

static int Copier_init(Copier *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"consumer", "producer", NULL};
    PyObject *consumer_settings, *producer_settings;
    char errstr[512];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO", names, &consumer_settings,
                                     &producer_settings))
        return -1;
    Copier_release(self);
    rd_kafka_conf_t *cconf = conf_from(consumer_settings, "consumer");
    if (!cconf) return -1;
    rd_kafka_conf_t *pconf = conf_from(producer_settings, "producer");
    if (!pconf) {
        rd_kafka_conf_destroy(cconf);
        return -1;
    }
    rd_kafka_conf_set_opaque(pconf, self);
    rd_kafka_conf_set_dr_msg_cb(pconf, on_delivery);
    self->producer = rd_kafka_new(RD_KAFKA_PRODUCER, pconf, errstr, sizeof errstr);
    if (!self->producer) {
        rd_kafka_conf_destroy(pconf);
        rd_kafka_conf_destroy(cconf);
        PyErr_Format(PyExc_ValueError, "producer: %s", errstr);
        return -1;
    }
    self->consumer = rd_kafka_new(RD_KAFKA_CONSUMER, cconf, errstr, sizeof errstr);
    if (!self->consumer) {
        rd_kafka_conf_destroy(cconf);
        Copier_release(self);
        PyErr_Format(PyExc_ValueError, "consumer: %s", errstr);
        return -1;
    }
    rd_kafka_poll_set_consumer(self->consumer);
    self->queue = rd_kafka_queue_get_consumer(self->consumer);
    return 0;
}

static void Copier_dealloc(Copier *self) {
    Py_BEGIN_ALLOW_THREADS Copier_release(self);
    Py_END_ALLOW_THREADS Py_TYPE(self)->tp_free((PyObject *)self);
}

static rd_kafka_topic_t *remote_topic(Copier *self, const char *name) {
    for (size_t i = 0; i < self->n_rkts; i++)
        if (strcmp(rd_kafka_topic_name(self->rkts[i]), name) == 0) return self->rkts[i];
    if (self->n_rkts == self->rkts_cap) {
        size_t cap = self->rkts_cap ? self->rkts_cap * 2 : 8;
        rd_kafka_topic_t **grown = realloc(self->rkts, cap * sizeof(*grown));
        if (!grown) return NULL;
        self->rkts = grown;
        self->rkts_cap = cap;
    }
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(self->producer, name, NULL);
    if (rkt) self->rkts[self->n_rkts++] = rkt;
    return rkt;
}

static PyObject *histogram_of(Job *job, Histogram *h) {
    PyObject *counts = PyList_New((Py_ssize_t)job->n_buckets + 1);
    if (!counts) return NULL;
    for (size_t i = 0; i <= job->n_buckets; i++)
        PyList_SET_ITEM(counts, (Py_ssize_t)i, PyLong_FromLongLong(h->counts[i]));
    return Py_BuildValue("(Nd)", counts, h->sum);
}

static PyObject *result_of(Job *job, Range *r) {
    PyObject *runs = PyList_New((Py_ssize_t)r->nruns);
    if (!runs) return NULL;
    for (size_t i = 0; i < r->nruns; i++) {
        PyObject *run = Py_BuildValue("(LLL)", (long long)r->runs[i * 3],
                                      (long long)r->runs[i * 3 + 1],
                                      (long long)r->runs[i * 3 + 2]);
        if (!run) {
            Py_DECREF(runs);
            return NULL;
        }
        PyList_SET_ITEM(runs, (Py_ssize_t)i, run);
    }
    /* where the range stands: the next source offset (its start if nothing was seen); with
     * copies in flight, the one after the last acknowledged copy */
    int64_t in_flight = r->produced - r->delivered;
    int64_t position = r->cursor > (r->start > 0 ? r->start : 0) ? r->cursor : r->start;
    /* A slice starts at the last reported position, which lags the consumer by the copies
     * that were in flight then; their reports came in this call (acked_next). */
    if (r->acked_next > position) position = r->acked_next;
    if (in_flight > 0) position = r->acked_next >= 0 ? r->acked_next : r->start;
    return Py_BuildValue("(LLLLNNNLLLL)", (long long)r->copied, (long long)r->skipped,
                         (long long)r->bytes, (long long)r->expired, runs,
                         histogram_of(job, &r->age), histogram_of(job, &r->latency),
                         (long long)position, (long long)in_flight, (long long)r->lost_first,
                         (long long)r->lost_last);
}

static void free_ranges(Range *ranges, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(ranges[i].topic);
        free(ranges[i].remote_topic);
        free(ranges[i].origin_before);
        free(ranges[i].origin_after);
        free(ranges[i].runs);
    }
    free(ranges);
}

static char *dup_str(PyObject *obj) {
    const char *s = NULL;
    Py_ssize_t len = 0;
    if (PyUnicode_Check(obj)) {
        s = PyUnicode_AsUTF8AndSize(obj, &len);
    } else if (PyBytes_Check(obj)) {
        s = PyBytes_AS_STRING(obj);
        len = PyBytes_GET_SIZE(obj);
    } else {
        PyErr_SetString(PyExc_TypeError, "expected str or bytes");
    }
    if (!s) return NULL;
    char *copy = malloc((size_t)len + 1);
    if (!copy) return (char *)PyErr_NoMemory();
    memcpy(copy, s, (size_t)len);
    copy[len] = '\0';
    return copy;
}

PyDoc_STRVAR(copy_doc,
             "copy(ranges, own_origin, unreachable, stall_timeout, buckets, sample_mask,\n"
             "     slice_seconds=0, continuing=False, settle=True, stopping=None,\n"
             "     stop_grace=5.0, ack_timeout=120.0)\n"
             "ranges: [(topic, partition, start, end, remote_topic, max_message_bytes,\n"
             "          origin_before, origin_after[, in_flight])]\n"
             "slice_seconds > 0: a lease's slice: stop consuming after that long and keep the\n"
             "assignment; continuing: the consumer is assigned already; settle: wait for the\n"
             "acks (else copies in flight carry over: give their count as in_flight next time).\n"
             "A wait for acks gives the batch up after ack_timeout seconds without one\n"
             "(error kind 'unacknowledged'), or after stop_grace seconds once the callable\n"
             "stopping returns true ('stopped'); the error's offset: milliseconds without one.\n"
             "Returns (results, error): results per range (copied, skipped, bytes, expired,\n"
             "runs, (age counts, age sum), (latency counts, latency sum), position,\n"
             "in_flight), or error\n"
             "(kind, range index, topic, partition, offset, code, reason, fatal, extra).");

static PyObject *Copier_copy(Copier *self, PyObject *args) {
    PyObject *range_list, *unreachable_seq, *bucket_seq;
    const char *own_origin;
    Py_ssize_t own_origin_len;
    double stall_timeout, slice_seconds = 0, stop_grace = 5.0, ack_timeout = 120.0;
    long long sample_mask;
    int continuing = 0, settle = 1;
    PyObject *stopping = Py_None;
    if (!PyArg_ParseTuple(args, "Oy#OdOL|dppOdd", &range_list, &own_origin, &own_origin_len,
                          &unreachable_seq, &stall_timeout, &bucket_seq, &sample_mask,
                          &slice_seconds, &continuing, &settle, &stopping, &stop_grace,
                          &ack_timeout))
        return NULL;
    if (stopping != Py_None && !PyCallable_Check(stopping)) {
        PyErr_SetString(PyExc_TypeError, "stopping must be callable or None");
        return NULL;
    }
    if (!self->producer || !self->consumer) {
        PyErr_SetString(PyExc_RuntimeError, "this copier is closed");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "this copier is copying already");
        return NULL;
    }
    PyObject *ranges_fast = PySequence_Fast(range_list, "ranges must be a sequence");
    PyObject *unreachable_fast = PySequence_Fast(unreachable_seq, "unreachable: a sequence");
    PyObject *buckets_fast = PySequence_Fast(bucket_seq, "buckets must be a sequence");
    PyObject *out = NULL;
    Job job;
    memset(&job, 0, sizeof job);
    int unreachable[64];
    double buckets[MAX_BUCKETS];
    if (!ranges_fast || !unreachable_fast || !buckets_fast) goto end;
    job.n_unreachable = (size_t)PySequence_Fast_GET_SIZE(unreachable_fast);
    job.n_buckets = (size_t)PySequence_Fast_GET_SIZE(buckets_fast);
    if (job.n_unreachable > 64 || job.n_buckets > MAX_BUCKETS) {
        PyErr_SetString(PyExc_ValueError, "too many unreachable codes or buckets");
        goto end;
    }
    for (size_t i = 0; i < job.n_unreachable; i++)
        unreachable[i] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(unreachable_fast, i));
    for (size_t i = 0; i < job.n_buckets; i++)
        buckets[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(buckets_fast, i));
    if (PyErr_Occurred()) goto end;
    job.unreachable = unreachable;
    job.buckets = buckets;
    job.own_origin = own_origin;
    job.own_origin_len = (size_t)own_origin_len;
    job.stall_ms = (int64_t)(stall_timeout * 1000);
    job.deadline_ms = slice_seconds > 0 ? mono_ms() + (int64_t)(slice_seconds * 1000) : 0;
    job.continuing = continuing;
    job.settle = settle;
    job.stopping = stopping == Py_None ? NULL : stopping; /* borrowed: args hold it */
    job.stop_grace_ms = (int64_t)(stop_grace * 1000);
    job.ack_timeout_ms = (int64_t)(ack_timeout * 1000);
    job.sample_mask = sample_mask;
    job.n = (size_t)PySequence_Fast_GET_SIZE(ranges_fast);
    job.ranges = calloc(job.n ? job.n : 1, sizeof(Range));
    if (!job.ranges) {
        PyErr_NoMemory();
        goto end;
    }
    for (size_t i = 0; i < job.n; i++) {
        Range *r = &job.ranges[i];
        PyObject *topic, *remote, *before, *after;
        long long start, end, max_bytes, in_flight = 0;
        int partition;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(ranges_fast, i), "OiLLOLOO|L;a range",
                              &topic, &partition, &start, &end, &remote, &max_bytes, &before,
                              &after, &in_flight))
            goto end;
        r->produced = in_flight; /* their reports come in this call */
        r->acked_next = -1;
        r->lost_first = r->lost_last = -1;
        r->partition = partition;
        r->start = start;
        r->end = end;
        r->max_message_bytes = max_bytes;
        if (!(r->topic = dup_str(topic)) || !(r->remote_topic = dup_str(remote)) ||
            !(r->origin_before = dup_str(before)) || !(r->origin_after = dup_str(after)))
            goto end;
        r->before_len = strlen(r->origin_before);
        r->after_len = strlen(r->origin_after);
        if (r->before_len + r->after_len + 24 > ORIGIN_MAX) {
            PyErr_Format(PyExc_ValueError, "the origin header of %s would exceed %d bytes",
                         r->topic, ORIGIN_MAX);
            goto end;
        }
        r->remote_rkt = remote_topic(self, r->remote_topic);
        if (!r->remote_rkt) {
            PyErr_Format(PyExc_ValueError, "cannot use topic %s: %s", r->remote_topic,
                         rd_kafka_err2str(rd_kafka_last_error()));
            goto end;
        }
    }
    int rc;
    self->busy = 1;
    self->job = &job;
    Py_BEGIN_ALLOW_THREADS rc = run_copy(self, &job);
    Py_END_ALLOW_THREADS self->job = NULL;
    self->busy = 0;
    if (rc) {
        self->broken = 1;
        out = Py_BuildValue("(O(slsiLisiL))", Py_None, job.error_kind, job.error_range,
                            job.error_topic, (int)job.error_partition,
                            (long long)job.error_offset, (int)job.error_code, job.error_reason,
                            job.error_fatal, (long long)job.error_extra);
        goto end;
    }
    PyObject *results = PyList_New((Py_ssize_t)job.n);
    if (!results) goto end;
    for (size_t i = 0; i < job.n; i++) {
        PyObject *result = result_of(&job, &job.ranges[i]);
        if (!result) {
            Py_DECREF(results);
            goto end;
        }
        PyList_SET_ITEM(results, (Py_ssize_t)i, result);
    }
    out = Py_BuildValue("(NO)", results, Py_None);
end:
    if (job.ranges) free_ranges(job.ranges, job.n);
    Py_XDECREF(ranges_fast);
    Py_XDECREF(unreachable_fast);
    Py_XDECREF(buckets_fast);
    return out;
}

static PyObject *Copier_close(Copier *self, PyObject *Py_UNUSED(ignored)) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "this copier is copying");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS Copier_release(self);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

static PyObject *Copier_broken(Copier *self, void *Py_UNUSED(closure)) {
    return PyBool_FromLong(self->broken);
}

static PyMethodDef Copier_methods[] = {
    {"copy", (PyCFunction)Copier_copy, METH_VARARGS, copy_doc},
    {"close", (PyCFunction)Copier_close, METH_NOARGS, "Close both clients."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Copier_getset[] = {
    {"broken", (getter)Copier_broken, NULL, "A copy failed: drop this copier.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CopierType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ferry.engine._fastcopy.Copier",
    .tp_doc = "A source consumer and a target producer that copy offset ranges.",
    .tp_basicsize = sizeof(Copier),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Copier_init,
    .tp_dealloc = (destructor)Copier_dealloc,
    .tp_methods = Copier_methods,
    .tp_getset = Copier_getset,
};

static PyObject *library_version(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored)) {
    return Py_BuildValue("(si)", rd_kafka_version_str(), rd_kafka_version());
}

static PyMethodDef module_methods[] = {
    {"library_version", library_version, METH_NOARGS, "librdkafka's (version, number)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ferry.engine.copy._fastcopy",
    "ferry's copy loop in C over librdkafka (see native/fastcopy.c)", -1, module_methods,
};

PyMODINIT_FUNC PyInit__fastcopy(void) {
    if (PyType_Ready(&CopierType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&CopierType);
    if (PyModule_AddObject(m, "Copier", (PyObject *)&CopierType) < 0) {
        Py_DECREF(&CopierType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "HEADER_VERSION", RD_KAFKA_VERSION);
    return m;
}
