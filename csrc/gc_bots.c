#include "gc_bots.h"

int gc_bot_random(gc_state *s) {
    int16_t legal[GC_NUM_ACTIONS];
    int n = gc_legal_actions(s, legal);
    if (n == 0) return -1;
    return legal[gc_rand(&s->rng) % (uint32_t)n];
}

int gc_bot_greedy(gc_state *s) {
    int16_t legal[GC_NUM_ACTIONS], best[GC_NUM_ACTIONS];
    int n = gc_legal_actions(s, legal), count = 0, top = -1;
    if (n == 0) return -1;
    for (int i = 0; i < n; i++) {
        int score = gc_action_captures(s, legal[i]);
        if (score > top) {
            top = score;
            count = 0;
        }
        if (score == top) best[count++] = legal[i];
    }
    return best[gc_rand(&s->rng) % (uint32_t)count];
}
