/*
 * tuning.h: measured times of named algorithms, as blk-tune writes them, and
 * the fastest one for a job between the measured points.
 *
 * The file (plain text, one measurement a line; '#' starts a comment):
 *     blk-tuning 1
 *     <ranks> <blocks> <k> <bytes> <algorithm> <microseconds>
 * bytes is one block's array. The names are the caller's business (the
 * array collectives use TREE, SPLIT, ...): this file only keeps them. At
 * most one line may give blk_cost_model's constants (seconds, >= 0), which
 * blk-tune fits:
 *     cost-model <alpha> <beta> <callback> <local> <gamma>
 * and at most one MPI's eager step, as blk-tune finds it: a message of lo
 * bytes goes at once, one of hi bytes after a handshake (1 <= lo < hi):
 *     eager-step <lo> <hi>
 *
 * The choice (blk__tuning_best): among the lines with the job's rank count,
 * the (blocks, k) measured nearest to the job's (k equal first, then blocks
 * nearest by ratio); there, the job's bytes, or the nearest size measured
 * when it lies beyond them; for each algorithm measured at that size or on
 * both sides of it, its time there, interpolated linearly in log(bytes) -
 * log(time) between the two measured sizes around it; the fastest. Pure functions of the table and
 * the job, so every rank that holds the same table chooses alike. No MPI.
 */
#ifndef BLK_TUNING_H
#define BLK_TUNING_H

#include <stddef.h>

typedef struct blk__tuning blk__tuning;

/* The constants of a cost-model line. */
#define BLK__TUNING_CONSTANTS 5

/* Reads text[0, len) into *out. label names it in errors ("file x.txt").
 * Returns 0, BLK_EINVAL naming the label, the line and what is wrong (no
 * "blk-tuning 1" first, a field missing or out of range, a name longer than
 * 31 characters, a cost-model line malformed or repeated, neither a
 * measurement nor a cost model), or BLK_ENOMEM. *out is NULL on
 * failure. */
int blk__tuning_parse(blk__tuning **out, const char *text, size_t len, const char *label);

void blk__tuning_free(blk__tuning *t);

/* The index in names[0, nnames) of the fastest algorithm for the job (see
 * the top), counting only the names listed; -1 if the table has nothing for
 * this rank count or none of these names there. */
int blk__tuning_best(const blk__tuning *t, int ranks, int blocks, int k, double bytes,
                     const char *const *names, int nnames);

/* The eager-step line's bracket into *lo and *hi, and 1; 0 if the file has
 * none. */
int blk__tuning_eager_step(const blk__tuning *t, size_t *lo, size_t *hi);

/* Copies the file's cost-model constants (alpha, beta, callback, local,
 * gamma) to c[0, BLK__TUNING_CONSTANTS) and returns 1; 0 if it has none. */
int blk__tuning_cost_model(const blk__tuning *t, double *c);

#endif
