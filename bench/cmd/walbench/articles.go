package main

import (
	"fmt"
	"io"

	"github.com/durawal/durawal/internal/articles"
)

// The four articles, as walbench's tables name them.
var (
	art000 = articles.A000
	art001 = articles.A001
	art002 = articles.A002
	art004 = articles.A004
)

// writeSources prints the four articles in full.
func writeSources(w io.Writer) {
	fmt.Fprintf(w, "The articles (their figures are theirs, measured on their machines; "+
		"walbench reruns their experiments against durawal):\n\n")
	for _, a := range articles.All {
		fmt.Fprintf(w, "- %s\n", a.Cite())
	}
	fmt.Fprintln(w)
}
