/* Runs gc_net_step over a case file written by benchmarks/cross_platform_net.py and writes the
 * outputs as raw float32: a way to run the C network step on another architecture (e.g. arm64
 * under qemu-user) and compare its bits with tests/golden/net_step.txt.
 * Case file: int32 hidden, layers, slots, steps; float32 encoder [120][H], encoder_bias [H],
 * gru[l] [H][3H] each, decoder [H][272], decoder_bias [272]; uint8 obs [steps][slots][120]. */
#include <stdio.h>
#include <stdlib.h>

#include "gc_net.h"

static void *read_block(FILE *f, size_t bytes) {
    void *p = malloc(bytes);
    if (!p || fread(p, 1, bytes, f) != bytes) {
        fprintf(stderr, "short case file\n");
        exit(2);
    }
    return p;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CASE OUT\n", argv[0]);
        return 2;
    }
    FILE *in = fopen(argv[1], "rb");
    if (!in) return 2;
    int32_t *head = read_block(in, 4 * sizeof(int32_t));
    int H = head[0], L = head[1], slots = head[2], steps = head[3];
    gc_net net = {.hidden = H, .layers = L, .simd = GC_NET_SIMD_BEST};
    net.encoder = read_block(in, sizeof(float) * GC_OBS_SIZE * H);
    net.encoder_bias = read_block(in, sizeof(float) * H);
    for (int l = 0; l < L; l++) net.gru[l] = read_block(in, sizeof(float) * H * 3 * H);
    net.decoder = read_block(in, sizeof(float) * H * GC_NET_DECODER_STRIDE);
    net.decoder_bias = read_block(in, sizeof(float) * GC_NET_DECODER_STRIDE);
    uint8_t *obs = read_block(in, (size_t)steps * slots * GC_OBS_SIZE);
    if (gc_net_prepare(&net) != 0) return 3;
    float *states = calloc((size_t)slots * L * H, sizeof(float));
    float *out = malloc(sizeof(float) * (size_t)steps * slots * GC_NET_OUTPUTS);
    int32_t *idx = malloc(sizeof(int32_t) * slots);
    for (int s = 0; s < slots; s++) idx[s] = s;
    for (int t = 0; t < steps; t++)
        gc_net_step(&net, slots, idx, obs + (size_t)t * slots * GC_OBS_SIZE, states, NULL,
                    out + (size_t)t * slots * GC_NET_OUTPUTS);
    FILE *o = fopen(argv[2], "wb");
    fwrite(out, sizeof(float), (size_t)steps * slots * GC_NET_OUTPUTS, o);
    fclose(o);
    printf("code path %d\n", net.simd);
    return 0;
}
