package lesson

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRecorderPercentile(t *testing.T) {
	var r Recorder
	require.Zero(t, r.Percentile(50))
	for i := 100; i >= 1; i-- {
		r.Add(time.Duration(i) * time.Millisecond)
	}
	require.Equal(t, 100, r.Count())
	require.Equal(t, 50*time.Millisecond, r.Percentile(50))
	require.Equal(t, 95*time.Millisecond, r.Percentile(95))
	require.Equal(t, 99*time.Millisecond, r.Percentile(99))
	require.Equal(t, 100*time.Millisecond, r.Percentile(100))
}

func TestFormatting(t *testing.T) {
	require.Equal(t, "7,680/s", PerSecond(7680, time.Second))
	require.Equal(t, "131 µs", Micros(131*time.Microsecond))
	require.Equal(t, "41.0 ms", Micros(41*time.Millisecond))
}

func TestOneLine(t *testing.T) {
	require.Equal(t, "a b c", OneLine("\ta\n\t\tb  c\n"))
}

func TestPick(t *testing.T) {
	require.Equal(t, 10, Pick(false, 10, 1))
	require.Equal(t, 1, Pick(true, 10, 1))
}

func TestRows(t *testing.T) {
	a := NewTable("level", "fsyncs")
	a.Row(1, "10,209")
	a.Row(0, "3,646/s")
	b := NewTable("policy", "lost")
	b.Row("everysec", 0)
	var s strings.Builder
	a.Fprint(&s)
	Explain(&s, "words")
	b.Fprint(&s)
	rows := Rows(s.String())
	require.Len(t, rows, 3)
	require.Equal(t, []string{"1", "10,209"}, rows["1"])
	require.Equal(t, 10209.0, Number(rows["1"][1]))
	require.Equal(t, 3646.0, Number(rows["0"][1]))
	require.Equal(t, []string{"everysec", "0"}, rows["everysec"])
	require.Equal(t, -1.0, Number("—"))
}
