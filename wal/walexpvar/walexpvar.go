// Package walexpvar publishes a [wal.Log]'s counters, gauges and latency
// distributions through the standard library's expvar package, so that
// /debug/vars (expvar's handler, served by net/http's DefaultServeMux
// once expvar is imported) shows them as JSON.
//
// The published value is computed when read: each read calls
// [wal.Log.Stats] once. It is the JSON form of [wal.Stats], field by field
// under the same names, except that each [wal.Histogram] is summarised as
// {"Count", "Sum", "Mean", "P50", "P99", "P999"} instead of its buckets,
// and a "Recovered" object holds the [wal.RecoveryInfo] that Open returned
// (Quarantined as a count). Durations are integer nanoseconds, as
// time.Duration marshals. For the full distributions use the Prometheus
// collector (module github.com/durawal/durawal/promwal) or Stats itself.
//
// Everything here is safe for concurrent use, as Stats is.
package walexpvar

import (
	"expvar"
	"reflect"

	"github.com/durawal/durawal/wal"
)

// Publish publishes l's statistics under name in expvar's registry, where
// they stay for the life of the process (expvar cannot unpublish; a
// closed Log keeps showing its last values). Like [expvar.Publish], it
// panics if name is already published: give each Log its own name, e.g.
// "durawal" plus the log's directory.
func Publish(name string, l *wal.Log) {
	expvar.Publish(name, Func(l))
}

// Func returns an [expvar.Func] that reports l's statistics as Publish
// describes, for callers that publish it themselves (inside an
// [expvar.Map], say).
func Func(l *wal.Log) expvar.Func {
	return func() any { return Summary(l.Stats(), l.Recovered()) }
}

// Summary returns the value Func publishes for s and rec: a map from the
// field names of [wal.Stats] to their values, with histograms summarised,
// plus "Recovered". It is what /debug/vars shows, as a Go value.
func Summary(s wal.Stats, rec wal.RecoveryInfo) map[string]any {
	m := make(map[string]any, 64)
	v := reflect.ValueOf(s)
	t := v.Type()
	histType := reflect.TypeFor[wal.Histogram]()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Type == histType {
			m[f.Name] = HistogramSummary(v.Field(i).Interface().(wal.Histogram))
			continue
		}
		m[f.Name] = v.Field(i).Interface()
	}
	m["Recovered"] = map[string]any{
		"Segments":    rec.Segments,
		"FirstLSN":    rec.FirstLSN,
		"EndLSN":      rec.EndLSN,
		"TornBytes":   rec.TornBytes,
		"RemovedTemp": rec.RemovedTemp,
		"Clean":       rec.Clean,
		"Unvouched":   rec.Unvouched,
		"Quarantined": len(rec.Quarantined),
		"Duration":    rec.Duration,
	}
	return m
}

// HistogramSummary returns the summary Publish shows for h: its count,
// sum, mean and p50/p99/p999 (durations in nanoseconds when marshalled).
func HistogramSummary(h wal.Histogram) map[string]any {
	return map[string]any{
		"Count": h.Count,
		"Sum":   h.Sum,
		"Mean":  h.Mean(),
		"P50":   h.P50(),
		"P99":   h.P99(),
		"P999":  h.P999(),
	}
}
