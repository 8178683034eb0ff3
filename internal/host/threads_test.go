package host

import "testing"

func TestParseThreadStat(t *testing.T) {
	line := "4242 (my game) srv) S 1 4242 4242 0 -1 4194624 1200 0 0 0 731 42 0 0 20 0 8 0 123456 1000000 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 5 0 0 0 0 0\n"
	st, ok := ParseThreadStat([]byte(line))
	if !ok || st.Comm != "my game) srv" || st.Ticks != 773 || st.CPU != 5 || st.Kernel {
		t.Errorf("parsed %+v %v", st, ok)
	}
	kt := "15 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 97 0 0 20 0 1 0 12 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0\n"
	if st, ok := ParseThreadStat([]byte(kt)); !ok || !st.Kernel || st.Ticks != 97 || st.CPU != 1 {
		t.Errorf("kernel thread %+v %v", st, ok)
	}
	if _, ok := ParseThreadStat([]byte("1 (init S 1")); ok {
		t.Error("truncated line accepted")
	}
}
