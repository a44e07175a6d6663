package measure

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i))
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {95, 95}, {99, 99}, {99.9, 100}, {100, 100}, {0.1, 1}} {
		if got := Percentile(s, tc.p); got != tc.want {
			t.Errorf("Percentile(1..100, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("Percentile(nil) = %v, want 0", got)
	}
}

func TestSummarizeAndCDF(t *testing.T) {
	s := []time.Duration{5, 1, 4, 2, 3}
	sum := Summarize(s)
	if sum.N != 5 || sum.Min != 1 || sum.Max != 5 || sum.P50 != 3 || sum.Mean != 3 {
		t.Fatalf("Summarize = %+v", sum)
	}
	pts := CDF(s, 2)
	if len(pts) == 0 || pts[len(pts)-1] != (Point{5, 1}) {
		t.Fatalf("CDF = %v, want last point {5 1}", pts)
	}
	if (Summarize(nil) != Summary{}) || CDF(nil, 10) != nil {
		t.Fatal("empty input must give zero values")
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{10209: "10,209", -1000: "-1,000", 999: "999", 0: "0", 1234567: "1,234,567"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestMedian(t *testing.T) {
	xs := []float64{3, 1, 2, 10}
	if got := Median(xs); got != 2 {
		t.Errorf("Median(%v) = %v, want 2 (the lower middle)", xs, got)
	}
	if xs[0] != 3 {
		t.Error("Median sorted its argument")
	}
	if Median(nil) != 0 {
		t.Error("Median(nil) != 0")
	}
}
