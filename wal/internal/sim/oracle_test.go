package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/durawal/durawal/wal"
	"github.com/stretchr/testify/require"
)

// TestOracle: the checks catch each kind of wrong recovery, and accept the
// right ones.
func TestOracle(t *testing.T) {
	mk := func() *runner {
		r := &runner{res: &Result{Reached: map[string]bool{}}, grave: map[string]string{},
			cutMaybe: math.MaxUint64, claimCap: math.MaxUint64}
		for i := range 4 {
			d, id := r.payload(100)
			r.lineage = append(r.lineage, entry{lsn: wal.LSN(i * 128), data: d, id: id, durable: i < 2, written: i < 3})
		}
		return r
	}
	recs := func(r *runner, idx ...int) []record {
		var out []record
		for _, i := range idx {
			out = append(out, record{r.lineage[i].lsn, r.lineage[i].data})
		}
		return out
	}
	cases := []struct {
		name  string
		crash EndKind
		build func(r *runner) []record
		want  string // "" for no violation
	}{
		{"prefix with every durable record", EndPower, func(r *runner) []record { return recs(r, 0, 1) }, ""},
		{"everything", EndPower, func(r *runner) []record { return recs(r, 0, 1, 2, 3) }, ""},
		{"durable record lost", EndPower, func(r *runner) []record { return recs(r, 0) }, "is missing"},
		{"written record lost in a process crash", EndProcess, func(r *runner) []record { return recs(r, 0, 1) }, "is missing"},
		{"a hole", EndPower, func(r *runner) []record { return recs(r, 0, 1, 3) }, "missing"},
		{"another record at an LSN", EndPower, func(r *runner) []record {
			out := recs(r, 0, 1, 2)
			d, _ := r.payload(100)
			r.grave[string(d)] = "record cut by TruncateFrom"
			out[2].data = d
			return out
		}, "cut by TruncateFrom"},
		{"a record never appended past the end", EndPower, func(r *runner) []record {
			d, _ := r.payload(50)
			return append(recs(r, 0, 1, 2, 3), record{4 * 128, d})
		}, "never appended"},
		{"a pending record adopted", EndPower, func(r *runner) []record {
			d, id := r.payload(50)
			r.pending = append(r.pending, entry{data: d, id: id})
			return append(recs(r, 0, 1, 2, 3), record{4 * 128, d})
		}, ""},
		{"below a removal's start", EndPower, func(r *runner) []record {
			r.removed, r.removeReq = 128, 128
			return recs(r, 0, 1)
		}, "came back below the start"},
		{"a maybe-cut tail may go", EndPower, func(r *runner) []record {
			r.lineage[1].durable = true
			r.cutMaybe = 128
			return recs(r, 0)
		}, ""},
		{"a maybe-cut tail is all or nothing", EndPower, func(r *runner) []record {
			r.lineage[1].durable, r.lineage[3].durable = true, true
			r.cutMaybe = 128
			return recs(r, 0, 1, 2)
		}, "is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mk()
			got := c.build(r)
			ok := r.verify("test", got, c.crash, true)
			if c.want == "" {
				require.True(t, ok, "%v", r.res.Violations)
				return
			}
			require.False(t, ok)
			require.Len(t, r.res.Violations, 1)
			require.True(t, strings.Contains(r.res.Violations[0], c.want), r.res.Violations[0])
		})
	}
}
