package moe

import (
	"fmt"
	"math"
)

// AuxScores are the router's scores for the load-balancing losses
// (compute_routing_scores_for_aux_loss) on logits [T, E]: Scores [T, E]
// the softmax of the logits, or σ(logits) normalised by its row sum
// + 1e-20; Map [T, E] each token's top k of those scores.
type AuxScores struct {
	T, E, K int
	Scores  []float32
	Map     []bool
	sigmoid bool
	sig     []float32 // σ(logits), for the sigmoid's backward
}

// NewAuxScores computes the aux-loss scores of logits [T, E] for top-k
// routing with score function fn.
func NewAuxScores(logits []float32, t, e, k int, fn string) (*AuxScores, error) {
	if len(logits) != t*e || k < 1 || k > e {
		return nil, fmt.Errorf("moe: aux scores of %d logits for %d tokens, %d experts, top-%d", len(logits), t, e, k)
	}
	a := &AuxScores{T: t, E: e, K: k, Scores: make([]float32, t*e), Map: make([]bool, t*e), sigmoid: fn == Sigmoid}
	if a.sigmoid {
		a.sig = make([]float32, t*e)
	}
	idx := make([]int, k)
	for i := 0; i < t; i++ {
		row, s := logits[i*e:(i+1)*e], a.Scores[i*e:(i+1)*e]
		if a.sigmoid {
			var sum float32
			for j, v := range row {
				a.sig[i*e+j] = sigmoid32(v)
				sum += a.sig[i*e+j]
			}
			for j := range s {
				s[j] = a.sig[i*e+j] / (sum + 1e-20)
			}
		} else {
			softmaxRow(s, row)
		}
		order(idx, s, nil)
		for _, j := range idx {
			a.Map[i*e+j] = true
		}
	}
	return a, nil
}

// TokensPerExpert returns the column sums of a [T, E] routing map.
func TokensPerExpert(m []bool, e int) []float32 {
	out := make([]float32, e)
	for i, on := range m {
		if on {
			out[i%e]++
		}
	}
	return out
}

// LoadBalancingLoss is Megatron's switch_load_balancing_loss_func on
// scores [T, C] with C = len(tokens) columns (the experts, or for the
// sequence-level loss each sequence's experts):
//
//	loss = E·coeff/(k·T²) · Σ_c tokens[c] · Σ_t scores[t, c]
//
// with tokens the columns' token counts, total the token count T (both
// possibly summed over more ranks than hold scores) and E = experts. It
// returns the loss and its gradient with respect to the scores,
// E·coeff/(k·T²)·tokens[c] in every row.
func LoadBalancingLoss(scores []float32, tokens []float32, total, experts, k int, coeff float64) (float64, []float32) {
	e := len(tokens)
	c := float64(experts) * coeff / (float64(k) * float64(total) * float64(total))
	var loss float64
	d := make([]float32, len(scores))
	for i, s := range scores {
		loss += float64(s) * float64(tokens[i%e])
		d[i] = float32(c * float64(tokens[i%e]))
	}
	return loss * c, d
}

// SeqLoadBalancingLoss is the sequence-level load-balancing loss of
// scores and map [s·b, E] (tokens in sequence-first order, token (i, j)
// at row i·b + j): each sequence's loss, averaged over the b sequences,
// as Megatron's seq_aux_loss computes it by viewing [s, b·E]. tokens [b·E]
// are the tokens per sequence and expert (TokensPerExpert(a.Map, b·E), or
// their sum over the ranks holding the sequences' other positions) and
// total the sequence length they count (s, or the sum).
func (a *AuxScores) SeqLoadBalancingLoss(s, b int, tokens []float32, total int, coeff float64) (float64, []float32, error) {
	if s*b != a.T || len(tokens) != b*a.E {
		return 0, nil, fmt.Errorf("moe: sequence aux loss of %d tokens as %d × %d (%d token counts)", a.T, s, b, len(tokens))
	}
	loss, d := LoadBalancingLoss(a.Scores, tokens, total, a.E, a.K, coeff)
	// Summed over the b sequences; their mean is the loss.
	f := 1 / float64(b)
	for i := range d {
		d[i] = float32(float64(d[i]) * f)
	}
	return loss * f, d, nil
}

// Backward returns the gradient with respect to the logits of Σ dScores·Scores.
func (a *AuxScores) Backward(dScores []float32) []float32 {
	e := a.E
	d := make([]float32, a.T*e)
	for i := 0; i < a.T; i++ {
		s, g, out := a.Scores[i*e:(i+1)*e], dScores[i*e:(i+1)*e], d[i*e:(i+1)*e]
		if !a.sigmoid {
			var dot float64
			for j := range s {
				dot += float64(g[j] * s[j])
			}
			for j := range s {
				out[j] = s[j] * (g[j] - float32(dot))
			}
			continue
		}
		sig := a.sig[i*e : (i+1)*e]
		var sum, dot float32
		for j := range sig {
			sum += sig[j]
			dot += g[j] * sig[j]
		}
		den := sum + 1e-20
		for j := range sig {
			ds := g[j]/den - dot/(den*den)
			out[j] = ds * sig[j] * (1 - sig[j])
		}
	}
	return d
}

// ZLoss is Megatron's z_loss_func on logits [T, E]: coeff·mean_t(lse_t²),
// lse_t = log Σ_e exp(logits[t, e]), and its gradient with respect to the
// logits, coeff·2·lse_t·softmax(logits_t)/T.
func ZLoss(logits []float32, t, e int, coeff float64) (float64, []float32) {
	var loss float64
	d := make([]float32, t*e)
	sm := make([]float32, e)
	for i := 0; i < t; i++ {
		row := logits[i*e : (i+1)*e]
		m := float32(math.Inf(-1))
		for _, v := range row {
			m = max(m, v)
		}
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v - m))
		}
		lse := float64(m) + math.Log(sum)
		loss += lse * lse
		softmaxRow(sm, row)
		for j, p := range sm {
			d[i*e+j] = float32(coeff * 2 * lse * float64(p) / float64(t))
		}
	}
	return coeff * loss / float64(t), d
}

// UpdateExpertBias is the aux-loss-free balancing step of
// finalize_model_grads (get_updated_expert_bias): with tokens[e] the
// tokens routed to expert e summed over the tensor-, data- and
// context-parallel ranks, bias[e] += sign(mean(tokens) − tokens[e])·rate.
func UpdateExpertBias(bias, tokens []float32, rate float64) {
	var mean float64
	for _, n := range tokens {
		mean += float64(n)
	}
	mean /= float64(len(tokens))
	for i, n := range tokens {
		switch d := mean - float64(n); {
		case d > 0:
			bias[i] += float32(rate)
		case d < 0:
			bias[i] -= float32(rate)
		}
	}
}
