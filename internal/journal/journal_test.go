package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sample() []Record {
	return []Record{
		{Type: TypeBegin, Txn: "t1", Meta: &Meta{Profile: "game-udp", BootID: "b1"}},
		{Type: TypeIntent, Txn: "t1", Seq: 1, Knob: "sysctl/net.core.somaxconn", Before: "4096", After: "1024"},
		{Type: TypeIntent, Txn: "t1", Seq: 2, Knob: "qdisc/eth0/root", Before: "pfifo_fast @default", After: "fq_codel"},
		{Type: TypeCommit, Txn: "t1"},
	}
}

func writeJournal(t *testing.T, recs []Record) (*Journal, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal")
	j, err := Open(path, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	for _, r := range recs {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	return j, path
}

func TestRoundTripAndReplay(t *testing.T) {
	j, _ := writeJournal(t, sample())
	st, err := j.Load()
	if err != nil {
		t.Fatal(err)
	}
	if st.Torn != nil || len(st.Txns) != 1 {
		t.Fatalf("state = %+v", st)
	}
	tx := st.Txns[0]
	if tx.Status != Applied || len(tx.Intents) != 2 || tx.Intents[1].Before != "pfifo_fast @default" || tx.Meta.Profile != "game-udp" {
		t.Errorf("txn = %+v", tx)
	}
	if st.Latest() != tx || !tx.InBoot("b1") || tx.InBoot("b2") {
		t.Error("latest/boot bookkeeping")
	}
}

// TestTornTailAtEveryByte cuts the last record at every possible length: the
// earlier records must always load, and the cut line must be reported as torn
// (never silently accepted, never an error that blocks recovery).
func TestTornTailAtEveryByte(t *testing.T) {
	_, path := writeJournal(t, sample())
	full, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(full, []byte("\n"))
	head := bytes.Join(lines[:3], nil)
	last := lines[3]
	for n := 1; n < len(last); n++ {
		data := append(append([]byte(nil), head...), last[:n]...)
		recs, torn, err := Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		if len(recs) != 3 || torn == nil || torn.Line != 4 || torn.Offset != int64(len(head)) {
			t.Fatalf("cut at %d: %d records, torn %+v", n, len(recs), torn)
		}
		st, err := Replay(recs)
		if err != nil || st.Txns[0].Status != Unfinished {
			t.Fatalf("cut at %d: without its commit the txn must be unfinished, got %v %v", n, st, err)
		}
	}
}

func TestCutTornThenAppend(t *testing.T) {
	j, path := writeJournal(t, sample()[:3])
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`deadbeef {"v":1,"type":"com`)
	f.Close()
	st, err := j.Load()
	if err != nil || st.Torn == nil {
		t.Fatalf("Load: %v torn=%v", err, st)
	}
	if err := j.CutTorn(st.Torn); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(Record{Type: TypeAbort, Txn: "t1", Error: "x"}); err != nil {
		t.Fatal(err)
	}
	st, err = j.Load()
	if err != nil || st.Torn != nil || st.Txns[0].Status != Aborted {
		t.Fatalf("after cut+append: %+v %v", st, err)
	}
}

func TestCorruptMiddleIsFatal(t *testing.T) {
	_, path := writeJournal(t, sample())
	b, _ := os.ReadFile(path)
	b = bytes.Replace(b, []byte(`"4096"`), []byte(`"4097"`), 1) // checksum now wrong
	_, _, err := Decode(bytes.NewReader(b))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want ErrCorrupt naming line 2", err)
	}
}

func TestNewerVersionRefused(t *testing.T) {
	r := Record{V: Version + 1, Type: TypeBegin, Txn: "t9", Time: time.Now()}
	line, _ := encode(r) // encode keeps V as given; Append would stamp Version
	_, _, err := Decode(bytes.NewReader(line))
	if !errors.Is(err, ErrNewer) {
		t.Fatalf("err = %v, want ErrNewer", err)
	}
}

func TestLockExcludesSecondWriter(t *testing.T) {
	_, path := writeJournal(t, nil)
	_, err := Open(path, ReadWrite)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("second writer: %v, want ErrLocked naming the holder pid", err)
	}
	if _, err := Open(path, ReadOnly); !errors.Is(err, ErrLocked) {
		t.Fatalf("reader during a write: %v, want ErrLocked", err)
	}
}

func TestReplayStates(t *testing.T) {
	now := time.Now()
	deadline := now.Add(time.Minute)
	recs := []Record{
		{Type: TypeBegin, Txn: "a", Meta: &Meta{BootID: "b1"}},
		{Type: TypeIntent, Txn: "a", Seq: 1, Knob: "k1"},
		{Type: TypeAbort, Txn: "a", Error: "EINVAL"},
		{Type: TypeBegin, Txn: "b", Meta: &Meta{ConfirmBy: &deadline}},
		{Type: TypeCommit, Txn: "b"},
		{Type: TypeBegin, Txn: "c"},
		{Type: TypeCommit, Txn: "c"},
		{Type: TypeRollbackBegin, Txn: "c"},
		{Type: TypeRestored, Txn: "c", Seq: 1},
		{Type: TypeRollbackEnd, Txn: "c", Failed: []string{"k9"}},
		{Type: TypeBegin, Txn: "d"},
	}
	st, err := Replay(recs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Status{"a": Aborted, "b": Applied, "c": RollingBack, "d": Unfinished}
	for _, tx := range st.Txns {
		if tx.Status != want[tx.ID] {
			t.Errorf("%s: status %s, want %s", tx.ID, tx.Status, want[tx.ID])
		}
	}
	if !st.Txns[1].PendingConfirm() {
		t.Error("b awaits confirmation")
	}
	if got := len(st.Incomplete()); got != 2 {
		t.Errorf("incomplete = %d, want 2 (c, d)", got)
	}
	if _, err := Replay([]Record{{Type: TypeCommit, Txn: "zz"}}); !errors.Is(err, ErrCorrupt) {
		t.Error("a commit without begin must be corrupt")
	}
}

func TestReplaySkippedIntent(t *testing.T) {
	st, err := Replay([]Record{
		{Type: TypeBegin, Txn: "s"},
		{Type: TypeIntent, Txn: "s", Seq: 1, Knob: "ethtool/eth0/coalesce/rx-usecs"},
		{Type: TypeSkipped, Txn: "s", Seq: 1, Knob: "ethtool/eth0/coalesce/rx-usecs", Error: "not writable here"},
		{Type: TypeIntent, Txn: "s", Seq: 2, Knob: "ethtool/eth0/ring/rx"},
		{Type: TypeCommit, Txn: "s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tx := st.Txns[0]
	if tx.Status != Applied || len(tx.Intents) != 1 || tx.Intents[0].Seq != 2 {
		t.Errorf("a skipped intent must leave the transaction: %+v", tx)
	}
}
