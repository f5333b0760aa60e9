/* A hybrid MPI+OpenMP 2-D heat-diffusion stencil (Jacobi sweeps): the grid's rows are split
 * into one slab per MPI rank; every sweep exchanges the slab's edge rows with its neighbours
 * (MPI_Sendrecv, a one-row halo) and updates the slab with `#pragma omp parallel for`.
 * Every rank prints one line saying who it is ("hybrid: rank R of S on HOST threads T");
 * rank 0 prints one line per epoch ("epoch N took S s", the slowest rank's time) and the
 * checksum of the final grid, and writes the checksum to result.txt.
 *
 * The checksum is summed serially per rank and reduced in rank order, so it depends on the
 * number of ranks but not on the thread count. Epoch 1 includes the first touch of the grids.
 *
 * Usage: stencil [--n N] [--epochs E] [--sweeps S]   (N rows in all, at least 4 per rank)
 */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long arg_long(int argc, char **argv, const char *name, long def) {
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return strtol(argv[i + 1], NULL, 10);
    return def;
}

/* Rows [first, first + rows) of the global grid are this rank's; local row 0 and
 * rows + 1 are the halo. */
typedef struct {
    long n, rows, first;
    int rank, size;
} slab_t;

static void init_slab(const slab_t *s, double *u, double *v) {
    const long n = s->n;
#pragma omp parallel for schedule(static)
    for (long li = 0; li < s->rows + 2; li++)
        for (long j = 0; j < n; j++) {
            long i = s->first + li - 1;
            double x = (double)i / (double)(n - 1), y = (double)j / (double)(n - 1);
            int edge = (i <= 0 || j == 0 || i >= n - 1 || j == n - 1);
            u[li * n + j] = edge ? 1.0 : x * y;
            v[li * n + j] = u[li * n + j];
        }
}

static void exchange_halo(const slab_t *s, double *u) {
    const long n = s->n;
    int up = s->rank > 0 ? s->rank - 1 : MPI_PROC_NULL;
    int down = s->rank < s->size - 1 ? s->rank + 1 : MPI_PROC_NULL;
    MPI_Sendrecv(&u[1 * n], (int)n, MPI_DOUBLE, up, 0, &u[(s->rows + 1) * n], (int)n,
                 MPI_DOUBLE, down, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&u[s->rows * n], (int)n, MPI_DOUBLE, down, 1, &u[0], (int)n, MPI_DOUBLE, up,
                 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void sweep(const slab_t *s, const double *u, double *v) {
    const long n = s->n;
#pragma omp parallel for schedule(static)
    for (long li = 1; li <= s->rows; li++) {
        long i = s->first + li - 1;
        if (i == 0 || i == n - 1) continue; /* the global boundary stays fixed */
        for (long j = 1; j < n - 1; j++)
            v[li * n + j] = 0.6 * u[li * n + j] +
                            0.1 * (u[(li - 1) * n + j] + u[(li + 1) * n + j] +
                                   u[li * n + j - 1] + u[li * n + j + 1]);
    }
}

static double checksum(const slab_t *s, const double *u) {
    double local = 0.0, sum = 0.0;
    for (long li = 1; li <= s->rows; li++)
        for (long j = 0; j < s->n; j++) {
            long k = (s->first + li - 1) * s->n + j;
            local += u[li * s->n + j] * (double)((k % 7) + 1);
        }
    /* Gathered and added in rank order: the same for any thread count. */
    double *parts = malloc(sizeof(double) * (size_t)s->size);
    MPI_Gather(&local, 1, MPI_DOUBLE, parts, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (s->rank == 0)
        for (int r = 0; r < s->size; r++) sum += parts[r];
    free(parts);
    return sum;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    slab_t s;
    MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s.size);
    s.n = arg_long(argc, argv, "--n", 1024);
    const long epochs = arg_long(argc, argv, "--epochs", 5);
    const long sweeps = arg_long(argc, argv, "--sweeps", 60);
    if (s.n < 8 || s.n < 4L * s.size || epochs < 1 || sweeps < 1) {
        if (s.rank == 0)
            fprintf(stderr, "stencil: need --n >= 8 and >= 4 per rank, --epochs >= 1, "
                            "--sweeps >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    s.rows = s.n / s.size + (s.rank < s.n % s.size ? 1 : 0);
    s.first = s.rank * (s.n / s.size) + (s.rank < s.n % s.size ? s.rank : s.n % s.size);
    double *u = malloc(sizeof(double) * (size_t)((s.rows + 2) * s.n));
    double *v = malloc(sizeof(double) * (size_t)((s.rows + 2) * s.n));
    if (!u || !v) {
        fprintf(stderr, "stencil: rank %d out of memory for n=%ld\n", s.rank, s.n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    char host[MPI_MAX_PROCESSOR_NAME];
    int len;
    MPI_Get_processor_name(host, &len);
    printf("hybrid: rank %d of %d on %s threads %d\n", s.rank, s.size, host,
           omp_get_max_threads());
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    if (s.rank == 0)
        printf("stencil: n=%ld epochs=%ld sweeps=%ld ranks=%d threads=%d\n", s.n, epochs, sweeps,
               s.size, omp_get_max_threads());
    for (long e = 1; e <= epochs; e++) {
        double t0 = MPI_Wtime();
        if (e == 1) init_slab(&s, u, v); /* first touch, inside the timed epoch */
        for (long k = 0; k < sweeps; k++) {
            exchange_halo(&s, u);
            sweep(&s, u, v);
            double *t = u;
            u = v;
            v = t;
        }
        double took = MPI_Wtime() - t0, slowest;
        MPI_Reduce(&took, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (s.rank == 0) {
            printf("epoch %ld took %.6f s\n", e, slowest);
            fflush(stdout);
        }
    }
    double sum = checksum(&s, u);
    int rc = 0;
    if (s.rank == 0) {
        printf("checksum %.17g\n", sum);
        FILE *f = fopen("result.txt", "w");
        if (f) {
            fprintf(f, "%.17g\n", sum);
            fclose(f);
        } else {
            perror("stencil: result.txt");
            rc = 1;
        }
    }
    free(u);
    free(v);
    MPI_Finalize();
    return rc;
}
