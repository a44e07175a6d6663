package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(t.Context(), t.TempDir(), &out))
	got := out.String()
	for _, row := range []string{
		"LSN  record\n",
		"0    \"set x=1\"\n",
		"32   \"set y=2\"\n",
		"64   \"del x\"\n",
	} {
		require.Contains(t, got, row)
	}
	require.Contains(t, strings.Join(strings.Fields(got), " "), "The 3 commits cost 3 fsyncs")
}
