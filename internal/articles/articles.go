// Package articles names the four published articles whose experiments
// bench/cmd/walbench and the examples/ lessons rerun, so that every table
// that prints an article's figures can say whose they are. It is tooling,
// like internal/measure: the library never imports it.
//
// None of the articles carries an author line, and two carry no title; those
// are named by their subject. Their figures were measured on their machines
// with their databases, never on ours.
package articles

import "fmt"

// Article is one source article.
type Article struct {
	ID       string // the project's number for it: "000", "001", "002", "004"
	Title    string // its own title, or its subject when it has none
	Titled   bool   // Title is the article's own title
	English  string // an English rendering of a title in another language
	Language string
	Site     string // where it was published, or "" if it does not say
	Year     string // "" if it does not say
	Measured string // the system, version and hardware it measured
}

// The four articles.
var (
	A000 = Article{ID: "000", Title: "innodb_flush_log_at_trx_commit and P99 on NVMe, a production tuning write-up",
		Language: "Chinese", Measured: "MySQL 8.0.35, sysbench oltp_update_non_index, Intel P5510 NVMe"}
	A001 = Article{ID: "001", Title: "appendfsync always/everysec/no", Titled: true,
		Language: "Chinese", Site: "bigywater.tech (Redis series, no. 64)", Year: "2026",
		Measured: "Redis 8.10.2, macOS SSD"}
	A002 = Article{ID: "002", Title: "MySQL 并发写入 fsync 悬崖：rows_examined=0 却慢 1s 的根因", Titled: true,
		English:  "The MySQL fsync cliff under concurrent writes: why an INSERT with rows_examined=0 takes 1 s",
		Language: "Chinese", Measured: "MySQL 8.0 in Docker, commodity SSD"}
	A004 = Article{ID: "004", Title: "counting the InnoDB redo log's fsyncs under innodb_flush_log_at_trx_commit",
		Language: "Vietnamese", Measured: "MySQL 8.4, data on tmpfs"}
	All = []Article{A000, A001, A002, A004}
)

// Cite is the full reference: number, title, language, site, year and what
// it measured.
func (a Article) Cite() string {
	title := fmt.Sprintf("%q", a.Title)
	if !a.Titled {
		title = "untitled (on " + a.Title + ")"
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

// Short names a in a table title: "article 004 (Vietnamese, MySQL 8.4, data
// on tmpfs)".
func (a Article) Short() string {
	return fmt.Sprintf("article %s (%s, %s)", a.ID, a.Language, a.Measured)
}
