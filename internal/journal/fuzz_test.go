package journal

import (
	"bytes"
	"testing"
)

// FuzzDecode: any byte string either decodes, or fails with an error; it
// never panics, and a clean decode replays or fails cleanly too.
func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	for _, r := range sample() {
		r.V = Version
		line, _ := encode(r)
		buf.Write(line)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("deadbeef {}\n"))
	f.Add([]byte("00000000 {\"v\":1,\"type\":\"begin\",\"txn\":\"x\"}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, torn, err := Decode(bytes.NewReader(b))
		if err != nil {
			return
		}
		if torn != nil && (torn.Offset < 0 || torn.Offset > int64(len(b))) {
			t.Fatalf("torn offset %d outside input of %d bytes", torn.Offset, len(b))
		}
		Replay(recs)
	})
}
