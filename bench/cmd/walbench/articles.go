package main

import (
	"fmt"
	"io"
)

// article is one of the four published articles whose experiments walbench
// reruns. None carries an author line; two carry no title either, and are
// named by their subject.
type article struct {
	ID       string // the project's number for it
	Title    string // its own title, or a description when it has none
	Titled   bool   // Title is the article's own
	English  string // English rendering of a title in another language
	Language string
	Site     string // where it was published, or "" if it does not say
	Year     string // "" if it does not say
	Measured string // the system, version and hardware it measured
}

// The four articles, by the project's number.
var (
	art000 = article{ID: "000", Title: "innodb_flush_log_at_trx_commit and P99 on NVMe: a production tuning write-up",
		Language: "Chinese", Measured: "MySQL 8.0.35, sysbench oltp_update_non_index, Intel P5510 NVMe"}
	art001 = article{ID: "001", Title: "appendfsync always/everysec/no", Titled: true,
		Language: "Chinese", Site: "bigywater.tech (Redis series, no. 64)", Year: "2026",
		Measured: "Redis 8.10.2, macOS SSD"}
	art002 = article{ID: "002", Title: "MySQL 并发写入 fsync 悬崖：rows_examined=0 却慢 1s 的根因", Titled: true,
		English:  "The MySQL fsync cliff under concurrent writes: why an INSERT with rows_examined=0 takes 1 s",
		Language: "Chinese", Measured: "MySQL 8.0 in Docker, commodity SSD"}
	art004 = article{ID: "004", Title: "Counting fsyncs: the InnoDB redo log and innodb_flush_log_at_trx_commit",
		Language: "Vietnamese", Measured: "MySQL 8.4, data on tmpfs"}
	articles = []article{art000, art001, art002, art004}
)

// cite is the full reference: title, language, site, year, what it measured.
func (a article) cite() string {
	title := fmt.Sprintf("%q", a.Title)
	if !a.Titled {
		title = fmt.Sprintf("untitled, on %s", a.Title)
	}
	if a.English != "" {
		title += fmt.Sprintf(" (%q)", a.English)
	}
	site := a.Site
	if site == "" {
		site = "site not named"
	}
	year := a.Year
	if year == "" {
		year = "year not stated"
	}
	return fmt.Sprintf("%s — %s; %s, %s, %s; measured %s", a.ID, title, a.Language, site, year, a.Measured)
}

// short names a in a table title: its number, language and system.
func (a article) short() string {
	return fmt.Sprintf("article %s (%s, %s)", a.ID, a.Language, a.Measured)
}

// writeSources prints the four articles in full.
func writeSources(w io.Writer) {
	fmt.Fprintf(w, "The articles (their figures are theirs, measured on their machines; "+
		"walbench reruns their experiments against durawal):\n\n")
	for _, a := range articles {
		fmt.Fprintf(w, "- %s\n", a.cite())
	}
	fmt.Fprintln(w)
}
