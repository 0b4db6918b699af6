/*
 * trace_check: checks the trace file of an example's run (BLK_TRACE) the
 * way a viewer reads it, and that it has every callback the run made.
 *
 *   trace_check FILE --ranks R --divisions D0 D1 --k K [--halving] --foreach F
 *
 * The run: blocks of a 2-D regular decomposition of D0 x D1 blocks,
 * assigned contiguously to R ranks, F foreach calls, then one merge with
 * radix k (histogram). Checked: the file parses as JSON (strictly) and as
 * trace events (trace_checks.h: names, ranks, threads, no callbacks
 * overlapping on a thread); every gid has exactly F foreach spans, on its
 * rank; the reduce spans are exactly the (gid, round) pairs the merge
 * pattern makes active (blk_partners_active, rounds 0..R); every rank has
 * one decompose, F foreach, one reduce and one destroy span.
 */
#include <blk/blk.h>
#include <stdlib.h>
#include <string.h>

#include "trace_checks.h"

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : NULL;
  int ranks = 0, div[2] = {0, 0}, k = 0, contiguous = 1, foreach = -1;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
      ranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--divisions") && i + 2 < argc) {
      div[0] = atoi(argv[++i]);
      div[1] = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--k") && i + 1 < argc)
      k = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--halving"))
      contiguous = 0;
    else if (!strcmp(argv[i], "--foreach") && i + 1 < argc)
      foreach
        = atoi(argv[++i]);
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  CHECK_MSG(path && ranks > 0 && div[0] > 0 && div[1] > 0 && k > 1 && foreach >= 0,
            "usage: trace_check FILE --ranks R --divisions D0 D1 --k K [--halving] --foreach F");
  int nblocks = div[0] * div[1];
  blk_assigner *a;
  blk_partners *p;
  CHECK_OK(blk_assigner_create_contiguous(&a, ranks, nblocks));
  CHECK_OK(blk_partners_create(&p, BLK_MERGE, 2, div, k, contiguous));
  int rounds = blk_partners_rounds(p);

  tj_trace t;
  CHECK_MSG(tj_read_file(&t, path) == 0, "%s: %s", path, t.error);
  tj_check_names(&t, ranks);
  for (int r = 0; r < ranks; r++) {
    CHECK_EQ_INT(tj_count_spans(&t, r, "operation", "decompose"), 1);
    CHECK_EQ_INT(tj_count_spans(&t, r, "operation", "foreach"), foreach);
    CHECK_EQ_INT(tj_count_spans(&t, r, "operation", "reduce"), 1);
    CHECK_EQ_INT(tj_count_spans(&t, r, "operation", "destroy"), 1);
  }
  /* seen[gid]: foreach spans; merged[gid * (rounds + 1) + round]: reduce spans. */
  int *seen = calloc((size_t)nblocks, sizeof *seen);
  int *merged = calloc((size_t)nblocks * (size_t)(rounds + 1), sizeof *merged);
  tj_event **spans = calloc(t.n + 1, sizeof *spans);
  CHECK(seen && merged && spans);
  int nspans = 0;
  for (size_t i = 0; i < t.n; i++) {
    tj_event *e = &t.events[i];
    if (strcmp(e->ph, "X") || strcmp(e->cat, "callback")) continue;
    spans[nspans++] = e;
    int gid = (int)e->gid, round = (int)e->round;
    CHECK_MSG(gid >= 0 && gid < nblocks, "a callback span of gid %g", e->gid);
    CHECK_MSG(blk_assigner_rank(a, gid) == (int)e->pid, "gid %d's %s is on rank %g", gid, e->name,
              e->pid);
    CHECK(e->bytes_in >= 0 && e->bytes_out >= 0);
    if (!strcmp(e->name, "foreach")) {
      seen[gid]++;
    } else {
      CHECK_MSG(!strcmp(e->name, "reduce"), "a callback span named %s", e->name);
      CHECK_MSG(round >= 0 && round <= rounds, "gid %d: reduce round %d", gid, round);
      merged[gid * (rounds + 1) + round]++;
    }
  }
  tj_check_tracks(spans, nspans);
  int reduce_spans = 0;
  for (int g = 0; g < nblocks; g++) {
    CHECK_MSG(seen[g] == foreach, "gid %d: %d foreach spans, expected %d", g, seen[g], foreach);
    for (int r = 0; r <= rounds; r++) {
      int want = blk_partners_active(p, r, g);
      CHECK_MSG(merged[g * (rounds + 1) + r] == want,
                "gid %d round %d: %d reduce spans, expected %d", g, r, merged[g * (rounds + 1) + r],
                want);
      reduce_spans += want;
    }
  }
  printf("trace_check: %s: %zu events; every callback found (%d foreach, %d reduce)\n", path, t.n,
         foreach * nblocks, reduce_spans);
  free(seen);
  free(merged);
  free(spans);
  tj_free(&t);
  blk_partners_destroy(p);
  blk_assigner_destroy(a);
  return 0;
}
