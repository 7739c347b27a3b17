/* Plain driver for the fuzz target (no libFuzzer): runs every file named on
 * the command line through LLVMFuzzerTestOneInput, then `rounds` seeded
 * random mutations of each (argv[1] = rounds). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
    for (int i = 2; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
        size_t got = fread(buf, 1, (size_t)n, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, got);
        for (long r = 0; r < rounds && got; r++) {
            uint8_t *m = malloc(got);
            memcpy(m, buf, got);
            int flips = 1 + (int)(next_rand() % 4);
            for (int k = 0; k < flips; k++)
                m[next_rand() % got] = (uint8_t)next_rand();
            size_t len = next_rand() % 8 == 0 ? next_rand() % (got + 1) : got; /* sometimes truncate */
            LLVMFuzzerTestOneInput(m, len);
            free(m);
        }
        free(buf);
    }
    puts("run_inputs: done");
    return 0;
}
