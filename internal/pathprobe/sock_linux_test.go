package pathprobe

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// Every echo request of a flow has one checksum, whatever its sequence
// number and payload (nonce, probe number, TTL), the flow's own sum.
func TestParisPad(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, flow := range []int{1, 33000, 60999, 65534, 65535} {
		want := ^parisSum(flow)
		for range 10000 {
			var msg [8 + payloadLen]byte
			msg[0] = 8
			binary.BigEndian.PutUint16(msg[4:], uint16(flow))
			probe := rng.Uint32()
			binary.BigEndian.PutUint16(msg[6:], uint16(probe))
			encodePayload(msg[8:], rng.Uint32(), probe, 1+rng.IntN(255))
			parisPad(msg[:], parisSum(flow))
			if got := checksum(msg[:]); got != want {
				t.Fatalf("flow %d, probe %d: checksum %#04x, want %#04x", flow, probe, got, want)
			}
			if p, ok := findPayload(msg[8:], binary.BigEndian.Uint32(msg[12:])); !ok || p != probe {
				t.Fatalf("flow %d: the padded payload no longer reads as probe %d (%d, %v)", flow, probe, p, ok)
			}
		}
	}
}
