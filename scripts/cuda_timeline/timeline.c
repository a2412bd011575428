// A CUDA injection library that records a process's device timeline with CUPTI's activity
// API: every kernel, copy and fill on the GPU, every CUDA driver call on the host (which
// thread, how long), and every synchronization. The machines cubenet is measured on have
// Nsight Compute but not Nsight Systems, and no profiler shows both sides of a step at once;
// this one works for any CUDA program, so cubenet and PyTorch are traced the same way.
//
// Built and used by scripts/cuda_timeline/trace.py (gcc, the CUDA toolkit's CUPTI headers and
// library): the driver loads it through CUDA_INJECTION64_PATH and calls InitializeInjection
// before the first CUDA call; records go, one line each, to the file named by
// CUDA_TIMELINE_OUT (tab-separated: kind, start ns, end ns, where — gpuN/streamM or threadN —
// and a name).
// Timestamps are CUPTI's, one clock for the host and the device.

#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Activity records arrive in buffers of this size (CUPTI asks for them as it fills them).
#define BUFFER_BYTES (8u << 20)

static FILE *out;

// A copy's direction, as CUpti_ActivityMemcpyKind numbers them.
static const char *copy_kind(unsigned kind) {
  switch (kind) {
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    return "host-to-device";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    return "device-to-host";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    return "device-to-device";
  case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
    return "peer-to-peer";
  default:
    return "copy";
  }
}

// What a host thread waited for, as CUpti_ActivitySynchronizationType numbers it.
static const char *sync_kind(unsigned type) {
  switch (type) {
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
    return "wait for an event";
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
    return "stream waits for an event";
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
    return "wait for a stream";
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
    return "wait for the context";
  default:
    return "synchronize";
  }
}

// Records CUPTI hands over while the application runs; a line each.
static void write_record(const CUpti_Activity *record) {
  switch (record->kind) {
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
  case CUPTI_ACTIVITY_KIND_KERNEL: {
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)record;
    fprintf(out, "kernel\t%llu\t%llu\tgpu%u/stream%u\t%s\n", (unsigned long long)k->start,
            (unsigned long long)k->end, k->deviceId, k->streamId, k->name ? k->name : "?");
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMCPY: {
    const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)record;
    fprintf(out, "memcpy\t%llu\t%llu\tgpu%u/stream%u\t%s %llu bytes\n",
            (unsigned long long)m->start, (unsigned long long)m->end, m->deviceId, m->streamId,
            copy_kind(m->copyKind), (unsigned long long)m->bytes);
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMSET: {
    const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)record;
    fprintf(out, "memset\t%llu\t%llu\tgpu%u/stream%u\tfill %llu bytes\n",
            (unsigned long long)m->start, (unsigned long long)m->end, m->deviceId, m->streamId,
            (unsigned long long)m->bytes);
    break;
  }
  case CUPTI_ACTIVITY_KIND_DRIVER: {
    const CUpti_ActivityAPI *api = (const CUpti_ActivityAPI *)record;
    const char *name = "?";
    cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, api->cbid, &name);
    fprintf(out, "driver\t%llu\t%llu\tthread%u\t%s\n", (unsigned long long)api->start,
            (unsigned long long)api->end, api->threadId, name);
    break;
  }
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
    const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)record;
    fprintf(out, "sync\t%llu\t%llu\tstream%u\t%s\n", (unsigned long long)s->start,
            (unsigned long long)s->end, s->streamId, sync_kind(s->type));
    break;
  }
  default:
    break;
  }
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, BUFFER_BYTES);
  *size = BUFFER_BYTES;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid) {
  (void)context;
  (void)stream;
  (void)size;
  CUpti_Activity *record = NULL;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    write_record(record);
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(context, stream, &dropped);
  if (dropped) {
    fprintf(out, "dropped\t0\t0\t-\t%zu records\n", dropped);
  }
  free(buffer);
}

// At exit: what CUPTI still holds, then the file.
static void flush_at_exit(void) {
  cuptiActivityFlushAll(1);
  if (out) {
    fclose(out);
    out = NULL;
  }
}

static int enable(CUpti_ActivityKind kind, const char *what) {
  CUptiResult result = cuptiActivityEnable(kind);
  if (result != CUPTI_SUCCESS) {
    const char *reason = "?";
    cuptiGetResultString(result, &reason);
    fprintf(stderr, "cuda_timeline: cannot record %s: %s\n", what, reason);
    return 1;
  }
  return 0;
}

int InitializeInjection(void) {
  const char *path = getenv("CUDA_TIMELINE_OUT");
  out = fopen(path ? path : "cuda_timeline.tsv", "w");
  if (!out) {
    perror("cuda_timeline: CUDA_TIMELINE_OUT");
    return 0;
  }
  uint64_t now = 0;
  cuptiGetTimestamp(&now);
  fprintf(out, "start\t%llu\t%llu\t-\tinjection\n", (unsigned long long)now,
          (unsigned long long)now);
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
    fprintf(stderr, "cuda_timeline: CUPTI refused the activity buffers\n");
    return 0;
  }
  int failed = enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernels") +
               enable(CUPTI_ACTIVITY_KIND_MEMCPY, "copies") +
               enable(CUPTI_ACTIVITY_KIND_MEMSET, "fills") +
               enable(CUPTI_ACTIVITY_KIND_DRIVER, "driver calls") +
               enable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "synchronizations");
  if (failed) {
    fprintf(stderr, "cuda_timeline: %d kinds of activity are missing from the trace\n", failed);
  }
  atexit(flush_at_exit);
  return 1;
}
