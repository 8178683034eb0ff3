package sockops

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// setOrder is the order the program sets options: the congestion control
// first, so that an initial window set after it is not re-initialised by the
// new algorithm.
var setOrder = []Option{Congestion, NoDelay, InitCwnd, DelackMax, RTOMin, NotSentLowat}

// Stack layout of both programs (offsets from the frame pointer).
const (
	stackKey   = -16 // the map key: u64 netns cookie, u32 port, u32 pad
	stackValue = -40 // an option's value: u32, or the 16-byte name
	stackIndex = -48 // a u32 index into the counts map
)

// newOptionsMap is the map the program reads: {netns, port} → entry.
func newOptionsMap() (*ebpf.Map, error) {
	return ebpf.NewMap(&ebpf.MapSpec{
		Name:       "lowlat_sockopt",
		Type:       ebpf.Hash,
		KeySize:    keySize,
		ValueSize:  entrySize,
		MaxEntries: 1024,
	})
}

// newCountsMap counts, per option, the calls bpf_setsockopt accepted (index
// 2·option) and refused (2·option+1): a refusal at run time (an initial
// window asked for after data was sent) is then visible, not silent.
func newCountsMap() (*ebpf.Map, error) {
	return ebpf.NewMap(&ebpf.MapSpec{
		Name:       "lowlat_sockcnt",
		Type:       ebpf.Array,
		KeySize:    4,
		ValueSize:  8,
		MaxEntries: uint32(2 * numOptions),
	})
}

// enforcer returns the program lowlat attaches: on the two established
// callbacks it looks {netns cookie, local port} up in opts and sets each
// option the entry holds, counting each outcome in counts. cookie says
// whether the kernel has bpf_get_netns_cookie in sock_ops (5.15); without
// it the key's cookie is 0 and an entry applies in every namespace.
// outbound is a cgroup or service selector's program, attached at that
// cgroup: it acts on the connections its processes open (active
// establishment only), and its key's port is 0.
func enforcer(opts, counts *ebpf.Map, cookie, outbound bool) asm.Instructions {
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, ctxOp, asm.Word),
		asm.JEq.Imm(asm.R2, opActiveEstab, "match"),
	}
	if !outbound {
		insns = append(insns, asm.JEq.Imm(asm.R2, opPassiveEstab, "match"))
	}
	insns = append(insns, asm.Ja.Label("out"))
	if cookie {
		insns = append(insns,
			asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("match"),
			asm.FnGetNetnsCookie.Call(),
			asm.StoreMem(asm.RFP, stackKey, asm.R0, asm.DWord))
	} else {
		insns = append(insns,
			asm.Mov.Imm(asm.R0, 0).WithSymbol("match"),
			asm.StoreMem(asm.RFP, stackKey, asm.R0, asm.DWord))
	}
	if outbound {
		insns = append(insns, asm.StoreImm(asm.RFP, stackKey+8, 0, asm.Word))
	} else {
		insns = append(insns,
			asm.LoadMem(asm.R2, asm.R6, ctxLocalPort, asm.Word),
			asm.StoreMem(asm.RFP, stackKey+8, asm.R2, asm.Word))
	}
	insns = append(insns,
		asm.StoreImm(asm.RFP, stackKey+12, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, opts.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.LoadMem(asm.R8, asm.R7, entryMaskOffset, asm.Word),
	)
	for i, o := range setOrder {
		next := "out"
		if i+1 < len(setOrder) {
			next = fmt.Sprintf("opt%d", setOrder[i+1])
		}
		block := asm.Instructions{
			asm.Mov.Reg(asm.R1, asm.R8),
			asm.And.Imm(asm.R1, 1<<uint(o)),
			asm.JEq.Imm(asm.R1, 0, next),
		}
		block = append(block, setsockopt(o, asm.R7)...)
		label := fmt.Sprintf("count%d", o)
		block = append(block,
			asm.Mov.Imm(asm.R1, int32(2*o)),
			asm.JEq.Imm(asm.R0, 0, label),
			asm.Mov.Imm(asm.R1, int32(2*o+1)),
			asm.StoreMem(asm.RFP, stackIndex, asm.R1, asm.Word).WithSymbol(label),
			asm.LoadMapPtr(asm.R1, counts.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, stackIndex),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, next),
			asm.Mov.Imm(asm.R1, 1),
			asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		)
		block[0] = block[0].WithSymbol(fmt.Sprintf("opt%d", o))
		insns = append(insns, block...)
	}
	return append(insns,
		// A sock_ops program returns 1; the value is ignored for these callbacks.
		asm.Mov.Imm(asm.R0, 1).WithSymbol("out"),
		asm.Return(),
	)
}

// setsockopt copies o's value from the entry at src to the stack and calls
// bpf_setsockopt(ctx, SOL_TCP, optname, &value, len). The context is in R6.
func setsockopt(o Option, src asm.Register) asm.Instructions {
	var insns asm.Instructions
	size := int32(4)
	if o == Congestion {
		size = tcpCANameMax
		insns = append(insns,
			asm.LoadMem(asm.R1, src, congestionOffset, asm.DWord),
			asm.StoreMem(asm.RFP, stackValue, asm.R1, asm.DWord),
			asm.LoadMem(asm.R1, src, congestionOffset+8, asm.DWord),
			asm.StoreMem(asm.RFP, stackValue+8, asm.R1, asm.DWord))
	} else {
		insns = append(insns,
			asm.LoadMem(asm.R1, src, options[o].offset, asm.Word),
			asm.StoreMem(asm.RFP, stackValue, asm.R1, asm.Word))
	}
	return append(insns,
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, solTCP),
		asm.Mov.Imm(asm.R3, options[o].optname),
		asm.Mov.Reg(asm.R4, asm.RFP),
		asm.Add.Imm(asm.R4, stackValue),
		asm.Mov.Imm(asm.R5, size),
		asm.FnSetsockopt.Call(),
	)
}

// prober returns Probe's program: on the passive established callback of a
// connection to local port port, it calls bpf_setsockopt with each option's
// probe value (from the entry at slot 0 of in) and stores each return code
// in results slot 0, at 8·option.
func prober(in, results *ebpf.Map, port uint16) asm.Instructions {
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, ctxOp, asm.Word),
		asm.JNE.Imm(asm.R2, opPassiveEstab, "out"),
		asm.LoadMem(asm.R2, asm.R6, ctxLocalPort, asm.Word),
		asm.JNE.Imm(asm.R2, int32(port), "out"),
		asm.StoreImm(asm.RFP, stackKey, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, in.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.LoadMapPtr(asm.R1, results.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Reg(asm.R8, asm.R0),
	}
	for _, o := range setOrder {
		insns = append(insns, setsockopt(o, asm.R7)...)
		insns = append(insns, asm.StoreMem(asm.R8, int16(8*o), asm.R0, asm.DWord))
	}
	return append(insns,
		asm.Mov.Imm(asm.R0, 1).WithSymbol("out"),
		asm.Return(),
	)
}
