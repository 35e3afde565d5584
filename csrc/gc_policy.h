/* The policy's distribution over the legal moves, for PPO (gcpipe/train/policy.py): the rollout's
 * sampling and the update's log-probabilities, entropies and their gradients, with one arithmetic
 * for both, so the update recomputes the rollout's log-probabilities to the bit (with the network's
 * outputs, gc_net.h and gc_mingru.h).  Per row of GC_NUM_ACTIONS logits and its legal mask:
 *     top = the largest legal logit,  w_a = gc_expf(l_a - top) for legal a,
 *     total = the sum of the w_a in action order (float),  log Z = top + gc_logf(total),
 *     log p_a = l_a - log Z,  entropy = the sum of p_a (log Z - l_a) (double), p_a = w_a / total.
 * Illegal moves have probability 0 (the torch path's -1e4 logits make them about 0).  Every row
 * must have a legal move.  The logits of row (i, j) start at logits + i * stride1 + j * stride2 (a
 * transposed view of the decoder's output); masks, actions and the per-row outputs are contiguous
 * [n1][n2] (rows in that order).  The functions take the rows r in [first, end) of the n1 * n2. */
#ifndef GC_POLICY_H
#define GC_POLICY_H
#include <stdint.h>

/* One move per row drawn by inverse CDF: the first legal move whose running sum of w reaches
 * u * total (u = uniforms[r] in [0, 1), the product at least the smallest normal float), the last
 * legal one if rounding leaves none; and its log-probability. */
void gc_policy_sample(int n1, int n2, const float *logits, int64_t stride1, int64_t stride2, const uint8_t *masks,
                      const float *uniforms, int first, int end, int64_t *actions, float *log_probs);

/* The log-probability of actions[r] and the entropy of each row. */
void gc_policy_terms(int n1, int n2, const float *logits, int64_t stride1, int64_t stride2, const uint8_t *masks,
                     const int64_t *actions, int first, int end, float *log_probs, float *entropies);

/* The gradient of the logits (contiguous [n1][n2][GC_NUM_ACTIONS]) from those of the log-probability
 * and the entropy of each row: for a legal move a,
 *     grad_log_prob ([a = action] - p_a) + grad_entropy p_a (log Z - l_a - entropy),
 * and 0 for an illegal one. */
void gc_policy_terms_grad(int n1, int n2, const float *logits, int64_t stride1, int64_t stride2,
                          const uint8_t *masks, const int64_t *actions, const float *grad_log_probs,
                          const float *grad_entropies, int first, int end, float *grad_logits);

#endif
