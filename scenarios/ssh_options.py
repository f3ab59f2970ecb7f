"""What sanlab hands OpenSSH from a file: the one allowlist of ssh options, and ssh's argv.

A scenario, an inventory and a run folder's ``scenario.yaml`` are data that
someone may have handed you.  OpenSSH has options that run a program on this
machine (ProxyCommand, LocalCommand, KnownHostsCommand, XAuthLocation;
ProxyJump goes through ``/bin/sh`` in OpenSSH before 9.6), load code
(PKCS11Provider, SecurityKeyProvider), read more configuration (Include,
which may hold any of those) or expand ``%`` tokens and ``${VARIABLES}``.
A denylist never knows them all, so this module lists the few options that
cannot run or load anything, each with a grammar for its value that admits
no shell character, no ``%`` token, no ``$``, no white space.  Anything else
is refused in one line that shows the value and says what is allowed; other
settings belong in ``~/.ssh/config``, which is the user's own.

It is also the only place that builds an ssh command line (``ssh_argv``), and
every option is checked again there, whichever way it came (a run folder's
copy of a scenario, an inventory, code): tests/test_hostile_ssh.py fails if
an ssh argument vector with ``-o`` is built anywhere else.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# A login name as useradd allows it by default, which is also what OpenSSH 9.6+ lets through.
USER = r"[a-z_][a-z0-9_.-]{0,31}"
# A host name or an IPv4 address: never starts with '-' (ssh would read an option).
HOST = r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}"
# Where ssh goes: [USER@]HOST, HOST a name or an address.  No shell characters.
# IPv6 addresses too: bare (root@::1, root@fe80::1) or in brackets (root@[::1]).
DESTINATION = (
    rf"^({USER}@)?"
    r"([A-Za-z0-9][A-Za-z0-9.:-]{0,252}|:[0-9A-Fa-f:.]{1,44}|\[[0-9A-Fa-f:.]{2,45}\])$"
)
DESTINATION_HINT = "[USER@]HOST, HOST a name or an IPv4 or IPv6 address (bare or in [brackets])"
# A local file's path: letters, digits and . _ + - /, optionally under ~/; never starts with
# '-'.  No space, quote, '$' (ssh expands ${VARIABLES} in paths) or '%' (ssh's tokens).
PATH = r"(~/|/)?[A-Za-z0-9_.+][A-Za-z0-9_.+/-]{0,249}"
PATH_HINT = "a file path of letters, digits and . _ + - /, optionally starting ~/ (not '-')"
MAX_HOPS = 4  # ProxyJump hops: a longer chain is a loop or a typo
MAX_OPTIONS = 16  # options per host: more is a mistake, and bounds the work of checking them
MAX_ARGS = 4096  # characters of an inventory's ssh arguments, split before anything is checked
KEYWORD = r"[A-Za-z][A-Za-z0-9]{0,39}"
# Every character any allowed value may hold; each option's own grammar narrows it further.
# No shell metacharacter, no '%', no '$', no white space, no quote.
SAFE_VALUE = r"[A-Za-z0-9_.,:@+/~^-]{1,250}"
# The shape of one option, for scenarios/schema.json (editors); check_option is the rule.
OPTION_SHAPE = rf"^{KEYWORD}={SAFE_VALUE}$"
KEY_FILE_SHAPE = rf"^{PATH}$"
NO_TOKENS = "no spaces, quotes, shell characters, '%' tokens or '$'"


def _shown(value: object) -> str:
    """A value as an error line shows it: quoted (escapes visible), cut to 40 characters."""
    text = value if not isinstance(value, str) or len(value) <= 40 else value[:40] + "..."
    return repr(text)


Check = Callable[[str], str]  # a value, canonical; ValueError (a detail, or nothing) if wrong


def _words(*allowed: str) -> tuple[str, Check]:
    def check(value: str) -> str:
        if value.lower() not in allowed:
            raise ValueError
        return value.lower()

    return " or ".join(allowed), check


def _number(low: int, high: int) -> tuple[str, Check]:
    def check(value: str) -> str:
        if not re.fullmatch(r"[0-9]{1,6}", value) or not low <= int(value) <= high:
            raise ValueError
        return str(int(value))

    return f"a whole number from {low} to {high}", check


def _pattern(pattern: str, hint: str) -> tuple[str, Check]:
    def check(value: str) -> str:
        if not re.fullmatch(pattern, value):
            raise ValueError
        return value

    return hint, check


def check_key_file(path: object) -> str:
    """A private key ssh can read: the path's grammar, then a regular, readable file (not a
    folder, a FIFO that would block ssh, or /dev/zero), named before any ssh runs."""
    if not isinstance(path, str) or not re.fullmatch(PATH, path):
        raise ValueError(f"{_shown(path)} is not a key file path sanlab takes: {PATH_HINT}; {NO_TOKENS}")
    full = Path(path).expanduser()
    try:
        info = os.stat(full)  # a link to a key is that key
    except OSError as exc:
        raise ValueError(f"{_shown(path)}: {exc.strerror}: give a private key file's path") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{_shown(path)} is not a regular file: give a private key file's path")
    if not os.access(full, os.R_OK):
        raise ValueError(f"{_shown(path)} cannot be read: give a private key file's path")
    return path


def _known_hosts(value: str) -> str:
    """/dev/null, or a file named *known_hosts*: ssh appends host keys to it, so it must never
    be a user's other file (a link named known_hosts is judged by what it leads to), and never
    a FIFO or a device it would block on or write into."""
    if value == "/dev/null":
        return value
    if not re.fullmatch(PATH, value) or "known_hosts" not in Path(value).name:
        raise ValueError
    real = Path(os.path.realpath(Path(value).expanduser()))
    if "known_hosts" not in real.name:
        raise ValueError(f"{_shown(value)} leads to {_shown(str(real))}")
    try:
        regular = stat.S_ISREG(os.stat(real).st_mode)
    except FileNotFoundError:  # ssh makes it when it first keeps a key
        return value
    except OSError as exc:
        raise ValueError(f"{_shown(value)}: {exc.strerror}") from None
    if not regular:
        raise ValueError(f"{_shown(value)} is not a regular file")
    return value


def _jump(value: str) -> str:
    """'none', or [USER@]HOST[:PORT] hops separated by ',': each one a user and host as a
    destination's (no IPv6 in a hop: its ':' and brackets are ambiguous to ssh's parser)."""
    if value.lower() == "none":
        return "none"
    hops = value.split(",")
    hop = rf"({USER}@)?{HOST}(:([1-9][0-9]{{0,4}}))?"
    if len(hops) > MAX_HOPS or not all(re.fullmatch(hop, h) for h in hops):
        raise ValueError
    if any(int(h.rpartition(":")[2]) > 65535 for h in hops if ":" in h):
        raise ValueError("a PORT is from 1 to 65535")
    return value


_JUMP_HINT = (
    f"none, or up to {MAX_HOPS} hops [USER@]HOST[:PORT] separated by ',' (USER lower-case "
    "letters, digits, _ . -; HOST a name or IPv4 address)"
)
# Algorithm names as ssh -Q lists them, optionally with a leading +, - or ^ (add, remove,
# put first).  No '*' or '?': ssh would match them as patterns.
_ALGORITHMS = _pattern(
    r"[+^-]?[a-z0-9][a-z0-9@._+-]{0,60}(,[a-z0-9][a-z0-9@._+-]{0,60}){0,31}",
    "algorithm names as 'ssh -Q' lists them, comma-separated, optionally after + - or ^",
)
_YES_NO = _words("yes", "no")


@dataclass(frozen=True)
class Allowed:
    name: str  # as ssh_config(5) spells it
    hint: str  # what the value may be, for the error line
    check: Check


# The options a scenario or inventory may give ssh, and why each cannot run or load anything.
ALLOWED = {
    a.name.lower(): a
    for a in (
        # A login name; ssh looks nothing up with it here.
        Allowed("User", *_pattern(USER, "a login name: lower-case letters, digits, _ . -")),
        # A number: where sshd listens.
        Allowed("Port", *_number(1, 65535)),
        # A key ssh reads as data; checked to be a regular file, so no FIFO hangs ssh.
        Allowed("IdentityFile", f"a readable private key file, {PATH_HINT}", check_key_file),
        # Which keys are offered: only the named ones.
        Allowed("IdentitiesOnly", *_YES_NO),
        # Jump hosts, each reached by ssh itself; the grammar keeps every hop shell-inert.
        Allowed("ProxyJump", _JUMP_HINT, _jump),
        # Time-outs and keep-alives: numbers and yes/no, nothing else.
        Allowed("ConnectTimeout", *_number(1, 3600)),
        Allowed("ConnectionAttempts", *_number(1, 10)),
        Allowed("ServerAliveInterval", *_number(0, 3600)),
        Allowed("ServerAliveCountMax", *_number(1, 100)),
        Allowed("TCPKeepAlive", *_YES_NO),
        # Host key checking: how strict, and where keys are kept (a known_hosts file only).
        Allowed("StrictHostKeyChecking", *_words("yes", "no", "accept-new")),
        Allowed(
            "UserKnownHostsFile",
            f"/dev/null or a regular file whose name holds 'known_hosts', {PATH_HINT}",
            _known_hosts,
        ),
        # The name a host key is looked up under in known_hosts: a name, never a path.
        Allowed("HostKeyAlias", *_pattern(HOST, "a host name: letters, digits, '.' and '-'")),
        # sanlab never prompts: a password prompt would hang a run.
        Allowed("BatchMode", *_words("yes")),
        # How bytes travel: a yes/no and a choice of IPv4 or IPv6, nothing named.
        Allowed("Compression", *_YES_NO),
        Allowed("AddressFamily", *_words("any", "inet", "inet6")),
        # Algorithm lists, for old switches and BMCs: names only.
        Allowed("Ciphers", *_ALGORITHMS),
        Allowed("MACs", *_ALGORITHMS),
        Allowed("KexAlgorithms", *_ALGORITHMS),
        Allowed("HostKeyAlgorithms", *_ALGORITHMS),
        Allowed("PubkeyAcceptedAlgorithms", *_ALGORITHMS),
        # Skips a Kerberos look-up that slows every connection on some networks.
        Allowed("GSSAPIAuthentication", *_YES_NO),
    )
}
ALLOWED_HINT = "ssh_options allows " + ", ".join(a.name for a in ALLOWED.values())
# Where the form itself is wrong, the form is what is allowed: the keys are for a wrong key.
FORM_HINT = f"for example Port=2222 ({len(ALLOWED)} keys allowed: docs/hardware.md, SSH options)"
# Why some well-known options are refused, for a better line than "not allowed".
REFUSED = {
    **dict.fromkeys(
        ("proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "xauthlocation"),
        "runs a program on this machine",
    ),
    **dict.fromkeys(("pkcs11provider", "securitykeyprovider", "proxyusefdpass"), "loads code into ssh"),
    **dict.fromkeys(("include", "match", "host"), "reads or selects more ssh configuration"),
    **dict.fromkeys(
        ("localforward", "remoteforward", "dynamicforward", "gatewayports", "tunnel", "tunneldevice"),
        "opens a port or tunnel",
    ),
    **dict.fromkeys(("forwardagent", "forwardx11", "forwardx11trusted", "identityagent"), "lends local keys"),
    **dict.fromkeys(("controlpath", "controlmaster", "controlpersist"), "is sanlab's own (one connection)"),
    **dict.fromkeys(("remotecommand", "requesttty", "sendenv", "setenv"), "changes what runs remotely"),
}


def check_option(text: object) -> str:
    """``KEY=VALUE`` as ssh -o takes it, if KEY is allowed and VALUE fits its grammar; returned
    with KEY spelled as ssh_config(5) spells it.  Otherwise one line: the value, why, what is
    allowed (raised as ValueError, which every reader turns into file: field: message)."""
    if not isinstance(text, str):
        raise ValueError(f"{_shown(text)} is not text: give KEY=VALUE; {FORM_HINT}")
    key, equals, value = text.partition("=")
    if not equals or not re.fullmatch(KEYWORD, key):
        raise ValueError(f"{_shown(text)} is not one KEY=VALUE ({NO_TOKENS}); {FORM_HINT}")
    allowed = ALLOWED.get(key.lower())
    if allowed is None:
        why = REFUSED.get(key.lower(), "is not an option sanlab passes to ssh")
        raise ValueError(f"{_shown(text)}: {key} {why}; {ALLOWED_HINT} (others: ~/.ssh/config)")
    if not re.fullmatch(SAFE_VALUE, value):
        raise ValueError(f"{_shown(text)}: {allowed.name} takes {allowed.hint}; {NO_TOKENS}")
    try:
        return f"{allowed.name}={allowed.check(value)}"
    except ValueError as exc:
        detail = f" ({exc})" if str(exc) else ""
        raise ValueError(f"{_shown(text)}: {allowed.name} takes {allowed.hint}{detail}") from None


def check_destination(destination: str) -> str:
    """[USER@]HOST as a scenario's ``ssh:`` gives it (the schema checks the same pattern)."""
    if not re.fullmatch(DESTINATION, destination):
        raise ValueError(f"ssh destination {_shown(destination)} is not {DESTINATION_HINT}")
    return destination


# ssh flags an inventory's ansible_ssh_common_args/ansible_ssh_extra_args may hold: each is
# the option it sets, checked like any other.  Any other flag (-F a config file, -E a log file,
# -L/-R/-D forwards, -A/-X agent and X11, -S a control socket, -W, -v, ...) is refused.
_FLAG_OPTIONS = {"-J": "ProxyJump", "-p": "Port", "-l": "User", "-i": "IdentityFile"}
_SWITCHES = {"-4": "AddressFamily=inet", "-6": "AddressFamily=inet6", "-C": "Compression=yes"}
FLAGS_HINT = "-o KEY=VALUE, -oKEY=VALUE, -J, -p, -l, -i, -4, -6, -C"


def _option_of(words: list[str], i: int) -> tuple[str, int]:
    """The option the flag at ``words[i]`` gives, and the index of the word after it."""
    word = words[i]
    if word in _SWITCHES:
        return _SWITCHES[word], i + 1
    flag = word[:2]
    if flag != "-o" and flag not in _FLAG_OPTIONS:
        raise ValueError(
            f"{_shown(word)} is not a flag sanlab takes into ssh_options (allowed: {FLAGS_HINT})"
        )
    if len(word) > 2:
        value, after = word[2:], i + 1
    elif i + 1 < len(words):
        value, after = words[i + 1], i + 2
    else:
        raise ValueError(f"{_shown(word)} ends the line: it needs a value (allowed: {FLAGS_HINT})")
    return (value if flag == "-o" else f"{_FLAG_OPTIONS[flag]}={value}"), after


def options_from_args(args: object) -> list[str]:
    """The options an ssh argument string gives (shlex words), each checked as ``check_option``
    checks a scenario's: ``-o K=V``, ``-oK=V`` and the few flags above.  Nothing (YAML's null
    or an empty string) gives none."""
    if args is None:
        return []
    if not isinstance(args, str) or len(args) > MAX_ARGS:
        raise ValueError(f"{_shown(args)} is not ssh arguments of at most {MAX_ARGS} characters")
    try:
        words = shlex.split(args)
    except ValueError as exc:  # an unbalanced quote
        raise ValueError(
            f"{_shown(args)} cannot be split into words ({exc}; allowed: {FLAGS_HINT})"
        ) from None
    options, i = [], 0
    while i < len(words):
        option, i = _option_of(words, i)
        options.append(check_option(option))
    if len(options) > MAX_OPTIONS:
        raise ValueError(f"{_shown(args)} gives {len(options)} ssh options; at most {MAX_OPTIONS}")
    return options


def ssh_argv(
    destination: str,
    remote: Sequence[str],
    control_dir: Path,
    port: int | None = None,
    identity: str | None = None,
    options: Sequence[str] = (),
    connect_timeout: int = 15,
) -> list[str]:
    """The whole ssh command line: sanlab's own options first (ssh takes an option's first
    value, so a file cannot turn off batch mode or the shared connection), then port and key,
    then the file's options, each checked again here, then defaults a file may override;
    ``--`` before the destination so that it is never read as an option."""
    check_destination(destination)
    user, at, host = destination.rpartition("@")
    if host.startswith("[") and host.endswith("]"):  # ssh takes user@::1, not user@[::1]
        host = host[1:-1]
    # The control socket's folder is sanlab's: quoted for spaces, '%' doubled so ssh keeps it.
    if re.search(r'["\\\x00-\x1f]', str(control_dir)):
        raise ValueError(f"{_shown(str(control_dir))}: a folder for ssh's socket without quotes or controls")
    socket = str(control_dir).replace("%", "%%") + "/ssh-%C"
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ControlMaster=auto", "-o", f'ControlPath="{socket}"']
    argv += ["-o", "ControlPersist=120"]
    if port:
        argv += ["-p", str(int(port))]
    if identity:
        check_key_file(identity)
        argv += ["-i", str(Path(identity).expanduser()), "-o", "IdentitiesOnly=yes"]
    for option in options:
        argv += ["-o", check_option(option)]
    argv += ["-o", f"ConnectTimeout={int(connect_timeout)}", "-o", "ServerAliveInterval=15"]
    argv += ["-o", "LogLevel=ERROR"]
    return [*argv, "--", f"{user}{at}{host}", *remote]
