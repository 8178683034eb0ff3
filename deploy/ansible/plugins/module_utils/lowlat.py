# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lowlat maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Run the installed lowlat binary and read its JSON.

The modules stay thin on purpose: lowlat decides, journals and rolls back;
a module only turns its options into flags and lowlat's JSON into Ansible's
changed, diff and return values.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

# Options every module takes.
COMMON_ARGS = dict(
    binary=dict(type='str', default='lowlat'),
    journal=dict(type='path'),
)

# lowlat's exit code when the gate rolled a change back (apply --prove).
EXIT_GATE_ROLLED_BACK = 4

# lowlat status's exit code when a knob drifted: the report is complete.
EXIT_DRIFT = 3


def binary_path(module):
    """The lowlat binary: an absolute path as given, else looked up on PATH."""
    b = module.params['binary']
    if b.startswith('/'):
        return b
    return module.get_bin_path(b, required=True)


def run_lowlat(module, args, journal=True):
    """Run lowlat with args (plus --journal when set and wanted).

    Returns (rc, data, stderr): data is the parsed JSON of stdout, or {}
    when lowlat printed none (an error it explains on stderr).
    """
    cmd = [binary_path(module)] + list(args)
    if journal and module.params.get('journal'):
        cmd += ['--journal', module.params['journal']]
    rc, out, err = module.run_command(cmd)
    data = {}
    if out.strip():
        try:
            data = json.loads(out)
        except ValueError as e:
            module.fail_json(msg='lowlat %s: unreadable JSON: %s' % (args[0], e), rc=rc, stdout=out, stderr=err, cmd=cmd)
    return rc, data, err.strip()


def status(module):
    """lowlat status --json's report, failing the task when status failed.

    Exit 3 (drift) is a complete report, not a failure; any other non-zero
    exit (an unreadable journal, bad flags) is: a check mode that read
    nothing must not report that nothing would change.
    """
    rc, data, err = run_lowlat(module, ['status', '--json'])
    if rc not in (0, EXIT_DRIFT):
        module.fail_json(msg=err or 'lowlat status: exit %d' % rc, rc=rc)
    return data


def find_txn(ids, txn):
    """The id in ids that txn names, as lowlat rollback --txn finds it.

    txn names a transaction by its id or by a unique prefix of at least four
    characters. Returns (id, None), or (None, error) worded as lowlat words it.
    """
    if txn in ids:
        return txn, None
    hits = [i for i in ids if len(txn) >= 4 and len(i) > len(txn) and i.startswith(txn)]
    if len(hits) > 1:
        return None, 'transaction "%s" is ambiguous' % txn
    if not hits:
        return None, 'no transaction "%s" in force' % txn
    return hits[0], None


def knob_diff(items):
    """Ansible's diff from lowlat's changes: one before/after per knob."""
    out = []
    for it in items or []:
        out.append(dict(
            before_header=it.get('knob', ''),
            after_header=it.get('knob', ''),
            before=(it.get('before') or '') + '\n',
            after=(it.get('after') or '') + '\n',
        ))
    return out
