package longtest

import "testing"

func TestLong(t *testing.T) {
	for _, c := range []struct {
		env  string
		want bool
	}{{"1", true}, {"", false}, {"0", false}, {"yes", false}} {
		t.Setenv(Env, c.env)
		if got := Long(); got != c.want {
			t.Errorf("%s=%q: Long() = %v, want %v", Env, c.env, got, c.want)
		}
		if got := Pick(2, 1); got != map[bool]int{true: 2, false: 1}[c.want] {
			t.Errorf("%s=%q: Pick(2, 1) = %d", Env, c.env, got)
		}
	}
}
