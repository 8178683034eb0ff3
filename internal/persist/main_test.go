//go:build linux

package persist

import (
	"testing"

	"github.com/lowlat/lowlat/internal/testnet"
)

func TestMain(m *testing.M) { testnet.Main(m) }
