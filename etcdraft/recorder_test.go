package etcdraft_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// errNotIssued is what a client's apply function returns for an operation
// it never sent (no leader known, or a node that refused it before
// proposing it): it is not recorded, and the client tries another.
var errNotIssued = errors.New("not issued")

// kvKeys is how many keys the clients use.
const kvKeys = 4

// recorder records a history of key-value operations: each operation's
// call and return, in nanoseconds since the recorder was made.
type recorder struct {
	t0      time.Time
	mu      sync.Mutex
	history []porcupine.Operation // operations that returned
	pending []porcupine.Operation // writes without an answer: they may or may not have taken effect
	acked   []kvOp                // acknowledged appends
}

func newRecorder() *recorder { return &recorder{t0: time.Now()} }

func (r *recorder) now() int64 { return int64(time.Since(r.t0)) }

// clients starts four clients that issue gets, puts and appends through
// apply until stop is set, and returns a function that waits for them.
func (r *recorder) clients(seed uint64, stop *atomic.Bool, apply func(kvOp) (string, error)) (wait func()) {
	var wg sync.WaitGroup
	for cl := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(cl)))
			for i := 0; !stop.Load(); i++ {
				in := kvOp{op: 'a', key: rng.IntN(kvKeys), val: fmt.Sprintf("%d.%d,", cl, i)}
				switch x := rng.IntN(10); {
				case x < 4:
					in.op, in.val = 'g', ""
				case x == 4:
					in.op = 'p'
				}
				call := r.now()
				out, err := apply(in)
				ret := r.now()
				if errors.Is(err, errNotIssued) {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				r.mu.Lock()
				switch {
				case err == nil:
					r.history = append(r.history, porcupine.Operation{ClientId: cl, Input: in, Call: call, Output: out, Return: ret})
					if in.op == 'a' {
						r.acked = append(r.acked, in)
					}
				case in.op != 'g': // may or may not have taken effect
					r.pending = append(r.pending, porcupine.Operation{ClientId: cl, Input: in, Call: call, Output: ""})
				}
				r.mu.Unlock()
			}
		})
	}
	return wg.Wait
}

// finalReads reads every key through apply once the clients stopped,
// retrying for up to 30 s each, and records the reads.
func (r *recorder) finalReads(t *testing.T, apply func(kvOp) (string, error)) map[int]string {
	t.Helper()
	finals := map[int]string{}
	for k := range kvKeys {
		for deadline := time.Now().Add(30 * time.Second); ; {
			require.True(t, time.Now().Before(deadline), "no final read of key %d", k)
			in := kvOp{op: 'g', key: k}
			call := r.now()
			out, err := apply(in)
			if err != nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			finals[k] = out
			r.history = append(r.history, porcupine.Operation{ClientId: 4, Input: in, Call: call, Output: out, Return: r.now()})
			break
		}
	}
	return finals
}

// check checks the history: writes without an answer return after
// everything; every acknowledged append must be in its key's final value
// unless a put to the key may have overwritten it (porcupine checks those);
// porcupine must find the history linearizable (an illegal one is written
// out as an HTML visualization named in the failure).
func (r *recorder) check(t *testing.T, finals map[int]string, seed uint64) porcupine.CheckResult {
	t.Helper()
	history := slices.Clone(r.history)
	var reads []string // what every get returned
	for _, op := range history {
		if op.Input.(kvOp).op == 'g' {
			reads = append(reads, op.Output.(string))
		}
	}
	end, kept := r.now()+1, 0
	for _, op := range r.pending {
		// A write without an answer whose value no read ever returned is
		// left out: if it took effect, a put erased it before any read, so
		// the history is linearizable with it exactly when it is without.
		// Each one kept may take effect anywhere after its call, and a
		// few dozen of them made porcupine time out under load.
		val := op.Input.(kvOp).val
		if !slices.ContainsFunc(reads, func(s string) bool { return strings.Contains(s, val) }) {
			continue
		}
		op.Return = end
		history = append(history, op)
		kept++
	}
	for _, in := range r.acked {
		if strings.Contains(finals[in.key], in.val) {
			continue
		}
		explained := slices.ContainsFunc(history, func(op porcupine.Operation) bool {
			p := op.Input.(kvOp)
			return p.op == 'p' && p.key == in.key
		})
		if !explained {
			t.Errorf("acknowledged append %q to key %d is not in its final value %q", in.val, in.key, finals[in.key])
		}
	}
	t0 := time.Now()
	res, info := porcupine.CheckOperationsVerbose(kvModel, history, time.Minute)
	t.Logf("porcupine: %s in %v, with %d writes without an answer (of %d: the others' values were never read)",
		res, time.Since(t0).Round(time.Millisecond), kept, len(r.pending))
	if res == porcupine.Illegal {
		f, err := os.CreateTemp("", "etcdraft-lin-*.html")
		if err == nil {
			porcupine.Visualize(kvModel, info, f)
			f.Close()
			t.Errorf("history (seed %d) is not linearizable: see %s", seed, f.Name())
		} else {
			t.Errorf("history (seed %d) is not linearizable", seed)
		}
	}
	return res
}
