package cli

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/journal"
)

// TestPurgeKeepsUnreadJournal takes the journal through what dpkg does on
// 'dpkg --purge lowlat': prerm runs 'lowlat __removing' (or fails to), then
// postrm purge runs with the binary gone. Purge deletes the journal only
// when prerm read it and found nothing in force; a damaged journal, one a
// newer lowlat wrote, or one prerm never read is kept, with a warning.
func TestPurgeKeepsUnreadJournal(t *testing.T) {
	script, err := os.ReadFile("../../deploy/package/scripts/postremove.sh")
	if err != nil {
		t.Fatal(err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// journal writes the journal at path (nothing: none).
		journal func(t *testing.T, path string)
		// removing runs __removing first; the rest happens between it and
		// the purge.
		removing bool
		between  func(t *testing.T, path string)
		keep     bool
		// warn is what the purge's warning must say.
		warn string
	}{
		{name: "in force", journal: activeJournal, removing: true, keep: true, warn: "t-active"},
		{name: "nothing in force", journal: rolledBackJournal, removing: true},
		{name: "no journal", removing: true},
		{name: "damaged", journal: damagedJournal, removing: true, keep: true, warn: "could not be read"},
		{name: "newer lowlat", journal: newerJournal, removing: true, keep: true, warn: "newer lowlat"},
		{name: "prerm did not run", journal: activeJournal, keep: true, warn: "was not read at removal"},
		{name: "prerm did not run, nothing in force", journal: rolledBackJournal, keep: true, warn: "was not read at removal"},
		{
			// A clear marker from an earlier removal, then a reinstall and
			// an apply, and this removal's prerm failed.
			name: "stale clear marker", journal: rolledBackJournal, removing: true,
			between: func(t *testing.T, path string) {
				appendRecords(t, path, journal.Record{Type: journal.TypeBegin, Txn: "t-later"}, journal.Record{Type: journal.TypeCommit, Txn: "t-later"})
			},
			keep: true, warn: "was not read at removal",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			state, etc, run := filepath.Join(base, "state"), filepath.Join(base, "etc-lowlat"), filepath.Join(base, "run-systemd")
			if err := os.MkdirAll(state, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(state, "journal")
			if tt.journal != nil {
				tt.journal(t, path)
			}
			var stderr bytes.Buffer
			if tt.removing {
				env := &Env{Stdout: &bytes.Buffer{}, Stderr: &stderr, Stdin: strings.NewReader(""), Getenv: func(k string) string {
					if k == "LOWLAT_JOURNAL" {
						return path
					}
					return ""
				}}
				if err := Main(context.Background(), []string{"__removing"}, env); err != nil {
					t.Fatalf("__removing: %v", err)
				}
			}
			if tt.between != nil {
				tt.between(t, path)
			}
			// The script with its paths moved into this test's tree: it
			// must not touch this machine's /var/lib/lowlat.
			text := strings.NewReplacer("/var/lib/lowlat", state, "/etc/lowlat", etc, "/run/systemd/system", run).Replace(string(script))
			for _, p := range []string{"/var/lib/lowlat", "/etc/lowlat", "/run/systemd"} {
				if strings.Contains(text, p) {
					t.Fatalf("postremove.sh names %s in a way this test does not move", p)
				}
			}
			out, err := exec.Command(sh, "-c", text, "postrm", "purge").CombinedOutput()
			if err != nil {
				t.Fatalf("postrm purge: %v\n%s", err, out)
			}
			_, statErr := os.Stat(path)
			switch {
			case tt.keep && statErr != nil:
				t.Errorf("purge deleted the journal (%v); __removing said:\n%s\npurge said:\n%s", statErr, stderr.String(), out)
			case tt.keep && (!strings.Contains(string(out), "WARNING: purge keeps "+state) || !strings.Contains(string(out), tt.warn)):
				t.Errorf("purge kept the journal without saying %q:\n%s", tt.warn, out)
			case !tt.keep:
				if _, err := os.Stat(state); err == nil {
					t.Errorf("purge kept %s with nothing in force:\n%s", state, out)
				}
				if len(out) > 0 {
					t.Errorf("purge with nothing in force said:\n%s", out)
				}
			}
		})
	}
}

func appendRecords(t *testing.T, path string, recs ...journal.Record) {
	t.Helper()
	j, err := journal.Open(path, journal.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, r := range recs {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
}

func activeJournal(t *testing.T, path string) {
	appendRecords(t, path, journal.Record{Type: journal.TypeBegin, Txn: "t-active"}, journal.Record{Type: journal.TypeCommit, Txn: "t-active"})
}

func rolledBackJournal(t *testing.T, path string) {
	appendRecords(t, path, journal.Record{Type: journal.TypeBegin, Txn: "t-old"}, journal.Record{Type: journal.TypeCommit, Txn: "t-old"},
		journal.Record{Type: journal.TypeRollbackBegin, Txn: "t-old"}, journal.Record{Type: journal.TypeRollbackEnd, Txn: "t-old"})
}

// damagedJournal has a transaction in force, then a line whose checksum no
// longer matches, then more records: not a torn tail, a damaged journal.
func damagedJournal(t *testing.T, path string) {
	activeJournal(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"type":"commit"`), []byte(`"type":"commiT"`), 1)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	appendRecordsRaw(t, path, `{"v":1,"type":"begin","txn":"t-next"}`)
}

// newerJournal has a record of a format this lowlat does not read.
func newerJournal(t *testing.T, path string) {
	activeJournal(t, path)
	appendRecordsRaw(t, path, fmt.Sprintf(`{"v":%d,"type":"begin","txn":"t-future"}`, journal.Version+1))
}

// appendRecordsRaw appends one checksummed line of JSON as lowlat writes it.
func appendRecordsRaw(t *testing.T, path, js string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "%08x %s\n", crc32.Checksum([]byte(js), crc32.MakeTable(crc32.Castagnoli)), js)
}
