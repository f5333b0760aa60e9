/* A 2-D heat-diffusion stencil (Jacobi sweeps) parallelised with OpenMP: optgate's
 * quickstart workload. Prints one line per epoch ("epoch N took S s") and a checksum of the
 * final grid, and writes the checksum to result.txt for byte-for-byte correctness checks.
 *
 * Epoch 1 includes the first touch of the grids (page faults, NUMA placement), so it is
 * naturally slower than the steady epochs — the warm-up optgate must not mistake for a
 * speed-up. The checksum is summed serially so it does not depend on the thread count.
 *
 * Built with -DONE_THREAD_UNLESS_SET it runs one thread when OMP_NUM_THREADS is unset, as
 * many real codes do by default (LAMMPS' OPENMP package, for one): the baseline of
 * experiments/propose-stencil.yaml, which keeps 1 of the node's cores busy.
 *
 * Usage: stencil [--n N] [--epochs E] [--sweeps S]
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long arg_long(int argc, char **argv, const char *name, long def) {
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return strtol(argv[i + 1], NULL, 10);
    return def;
}

int main(int argc, char **argv) {
    const long n = arg_long(argc, argv, "--n", 1024);
    const long epochs = arg_long(argc, argv, "--epochs", 5);
    const long sweeps = arg_long(argc, argv, "--sweeps", 60);
    if (n < 8 || epochs < 1 || sweeps < 1) {
        fprintf(stderr, "stencil: need --n >= 8, --epochs >= 1, --sweeps >= 1\n");
        return 2;
    }
#ifdef ONE_THREAD_UNLESS_SET
    if (!getenv("OMP_NUM_THREADS")) omp_set_num_threads(1);
#endif
    double *u = malloc(sizeof(double) * n * n);
    double *v = malloc(sizeof(double) * n * n);
    if (!u || !v) {
        fprintf(stderr, "stencil: out of memory for n=%ld\n", n);
        return 1;
    }
    printf("stencil: n=%ld epochs=%ld sweeps=%ld threads=%d\n", n, epochs, sweeps,
           omp_get_max_threads());
    for (long e = 1; e <= epochs; e++) {
        double t0 = omp_get_wtime();
        if (e == 1) {
            /* First touch happens here, inside the timed epoch, on the threads that will
             * use the pages. */
#pragma omp parallel for schedule(static)
            for (long i = 0; i < n; i++)
                for (long j = 0; j < n; j++) {
                    double x = (double)i / (double)(n - 1), y = (double)j / (double)(n - 1);
                    u[i * n + j] = (i == 0 || j == 0 || i == n - 1 || j == n - 1) ? 1.0 : x * y;
                    v[i * n + j] = u[i * n + j];
                }
        }
        for (long s = 0; s < sweeps; s++) {
#pragma omp parallel for schedule(static)
            for (long i = 1; i < n - 1; i++)
                for (long j = 1; j < n - 1; j++)
                    v[i * n + j] = 0.6 * u[i * n + j] +
                                   0.1 * (u[(i - 1) * n + j] + u[(i + 1) * n + j] +
                                          u[i * n + j - 1] + u[i * n + j + 1]);
            double *t = u;
            u = v;
            v = t;
        }
        double t1 = omp_get_wtime();
        printf("epoch %ld took %.6f s\n", e, t1 - t0);
        fflush(stdout);
    }
    double sum = 0.0;
    for (long i = 0; i < n * n; i++) sum += u[i] * (double)((i % 7) + 1);
    printf("checksum %.17g\n", sum);
    FILE *f = fopen("result.txt", "w");
    if (!f) {
        perror("stencil: result.txt");
        return 1;
    }
    fprintf(f, "%.17g\n", sum);
    fclose(f);
    free(u);
    free(v);
    return 0;
}
