#!/bin/sh
# lowlat's postrm (deb: remove, purge, upgrade, ...) and %postun (rpm: 0
# erase, 1 upgrade).
#
# purge removes lowlat's state, except the journal of transactions that may
# still be in force: it is the only record of what the host had before, and
# a reinstalled lowlat rolls them back from it. prerm ('lowlat __removing')
# read the journal while the binary was still there, and left beside it:
#   in-force-at-removal: the transactions in force, or why the journal could
#     not be read (damaged, written by a newer lowlat): keep it;
#   clear-at-removal: nothing in force, and the journal's identity as
#     stat -c '%i %s %Y' prints it.
# The journal is deleted only when it is empty or absent, or when prerm found
# nothing in force in this very file (unchanged since). A journal prerm did
# not read (it failed, or did not run) is kept. Then the purge warns loudly
# and keeps /var/lib/lowlat. rpm has no purge: the journal stays on erase.
#
# rpm's upgrade restarts the monitor and the autorate instances that run
# here, with the new files in place (%systemd_postun_with_restart); Debian's
# does it in postinst.
set -e
state=/var/lib/lowlat
journal=$state/journal
case "$1" in
purge)
	if [ ! -s "$state/in-force-at-removal" ] && [ -s "$journal" ] &&
		[ "$(stat -L -c '%i %s %Y' "$journal" 2>/dev/null)" != "$(cat "$state/clear-at-removal" 2>/dev/null)" ]; then
		echo "unknown: the journal $journal was not read at removal ('lowlat __removing' failed or did not run)" >"$state/in-force-at-removal"
	fi
	if [ -s "$state/in-force-at-removal" ]; then
		why="these transactions are still in force:"
		if grep -q '^unknown:' "$state/in-force-at-removal"; then
			why="what lowlat left in force is unknown:"
		fi
		echo "########################################################################" >&2
		echo "lowlat: WARNING: purge keeps $state: $why" >&2
		sed 's/^/lowlat:     /' "$state/in-force-at-removal" >&2
		echo "lowlat: the host keeps lowlat's tuning. To undo it: reinstall lowlat, then" >&2
		echo "lowlat:     lowlat rollback --all" >&2
		echo "lowlat: then purge again. Deleting $state loses the only record of the" >&2
		echo "lowlat: values the host had before." >&2
		echo "########################################################################" >&2
	else
		rm -rf "$state"
	fi
	rmdir /etc/lowlat 2>/dev/null || true
	;;
esac
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	case "$1" in
	[1-9]*)
		systemctl try-restart lowlat-monitor.service 'lowlat-autorate@*.service' >/dev/null 2>&1 || true
		;;
	esac
fi
exit 0
