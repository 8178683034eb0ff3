//go:build linux

package passive

import "testing"

// The first key at a cache index holds it; every later one marks it
// overflowing (the programs then look in the hash map), never replaces it.
func TestSlotCacheOverflow(t *testing.T) {
	var a, b, c passiveSlotKey
	a = passiveSlotKey{Kind: kindTCP, Proto: 6, Port: 7431, Id: 1}
	for p := uint16(1); p != 0; p++ {
		k := passiveSlotKey{Kind: kindTCP, Proto: 6, Port: p, Id: 1}
		if p != a.Port && slotCacheIndex(k) == slotCacheIndex(a) {
			if b.Port == 0 {
				b = k
			} else {
				c = k
				break
			}
		}
	}
	if c.Port == 0 {
		t.Fatal("found no three colliding keys")
	}
	other := passiveSlotKey{Kind: kindRXStack, Proto: 17, Port: 7777}
	cache := slotCache([]slotEntry{
		{a, passiveSlot{Index: 1}}, {b, passiveSlot{Index: 2}}, {c, passiveSlot{Index: 3}}, {other, passiveSlot{Index: 4}},
	})
	got := cache[slotCacheIndex(a)]
	if got.Key != a || got.Val.Index != 1 || got.Flags != 3 {
		t.Errorf("shared index: %+v; want the first key, present and overflowing", got)
	}
	if o := cache[slotCacheIndex(other)]; slotCacheIndex(other) != slotCacheIndex(a) && (o.Key != other || o.Flags != 1) {
		t.Errorf("a key alone at its index: %+v; want it present, not overflowing", o)
	}
	for i := range cache {
		if i >= 1<<slotCacheBits {
			t.Errorf("index %d beyond the cache's %d entries", i, 1<<slotCacheBits)
		}
	}
}
