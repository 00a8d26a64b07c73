#!/usr/bin/env python3
"""Writes Busymate's generated man pages (roff) on stdout.

  busymate --experimental-dump-help | manpage.py cli --version V   -> busymate(1)
  manpage.py settings --version V < docs/settings.md                -> busymate-settings(5)

busymate(1) comes from the CLI's own description of itself (swift-argument-
parser's tool info), so every command and option in it is one the program
has. busymate-settings(5) comes from the key tables of docs/settings.md,
whose keys a test checks against the settings reader.
"""
import argparse
import json
import os
import re
import sys
import time

# SOURCE_DATE_EPOCH, when set, makes the pages reproducible.
DATE = time.strftime("%Y-%m-%d", time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))))


def esc(text):
    """Plain text as roff: backslashes, hyphens and a leading dot or quote."""
    text = (text or "").replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line[:1] in (".", "'") else line for line in text.split("\n"))


def names(argument):
    out = []
    for name in argument.get("names") or []:
        prefix = {"long": "--", "short": "-", "longWithSingleDash": "-"}.get(name.get("kind"), "--")
        out.append(prefix + name["name"])
    return out


def argument_synopsis(argument):
    value = argument.get("valueName") or "value"
    if argument.get("kind") == "positional":
        text = "\\fI%s\\fR" % esc(value)
    else:
        flag = (names(argument) or ["--" + value])[0]
        text = "\\fB%s\\fR" % esc(flag)
        if argument.get("kind") == "option":
            text += " \\fI%s\\fR" % esc(value)
    if argument.get("isRepeating"):
        text += "..."
    return "[%s]" % text if argument.get("isOptional") else text


def visible(items):
    return [item for item in items or [] if item.get("shouldDisplay", True)]


def command_section(command, path, out):
    full = " ".join(path)
    arguments = [a for a in visible(command.get("arguments")) if not set(names(a)) & {"--help", "-h", "--version"}]
    out.append(".SS %s" % esc(full))
    synopsis = " ".join(argument_synopsis(a) for a in arguments)
    out.append(".B %s" % esc(full))
    if synopsis:
        out.append(synopsis)
    out.append(".br")
    if command.get("abstract"):
        out.append(esc(command["abstract"]))
    if command.get("discussion"):
        out.append(".PP")
        out.append(esc(command["discussion"].strip()))
    for argument in arguments:
        label = ", ".join(names(argument)) or (argument.get("valueName") or "")
        if argument.get("kind") == "option":
            label += " " + (argument.get("valueName") or "value")
        out.append(".TP")
        out.append("\\fB%s\\fR" % esc(label))
        text = argument.get("abstract") or ""
        if argument.get("defaultValue"):
            text += " (default: %s)" % argument["defaultValue"]
        out.append(esc(text.strip()) or "\\&")
        if argument.get("discussion"):
            out.append(esc(str(argument["discussion"]).strip()) if isinstance(argument["discussion"], str) else "")
    for sub in visible(command.get("subcommands")):
        command_section(sub, path + [sub["commandName"]], out)


def cli(version):
    info = json.load(sys.stdin)["command"]
    out = [
        '.TH BUSYMATE 1 "%s" "busymate %s" "User Commands"' % (DATE, esc(version)),
        ".SH NAME",
        "busymate \\- %s" % esc(info.get("abstract", "")),
        ".SH SYNOPSIS",
        ".B busymate",
        "[\\fB\\-\\-group\\fR \\fIDIR\\fR] \\fICOMMAND\\fR ...",
        ".SH DESCRIPTION",
        esc("busymate reads the capture of the Busymate appliance (its SQLite store in the group directory) and steers the "
            "running appliance through its supervisor's control socket. Root, or a member of group busymate, may use it. "
            "The group directory is --group, else $BUSYMATE_GROUP, else /var/lib/busymate/group when it exists, else ./shared-group."),
        ".SH COMMANDS",
    ]
    for sub in visible(info.get("subcommands")):
        command_section(sub, ["busymate", sub["commandName"]], out)
    out += [
        ".SH EXIT STATUS",
        esc("0 on success; 1 on an error, said on standard error; busymate status exits 1 when something is wrong and 3 "
            "when no supervisor serves the group."),
        ".SH SEE ALSO",
        ".BR busymate-app (8),",
        ".BR busymate-settings (5)",
        ".PP",
        "/usr/share/doc/busymate/README.md",
    ]
    return "\n".join(line for line in out if line is not None) + "\n"


def settings(version):
    text = sys.stdin.read()
    out = [
        '.TH BUSYMATE-SETTINGS 5 "%s" "busymate %s" "File Formats"' % (DATE, esc(version)),
        ".SH NAME",
        "busymate-settings \\- settings.json, the Busymate appliance's settings",
        ".SH DESCRIPTION",
        esc("settings.json, in the group directory (/var/lib/busymate/group), is one JSON object. The supervisor, the "
            "tunnel and the web front watch it: a change is in force moments after it is saved, without a restart, "
            "unless a key below says otherwise. An invalid file is reported (busymate status, the STATUS line, the "
            "journal) with its line and column, and the last valid settings stay in force. The busymate command edits "
            "it in place (busymate ssl-proxying, rules, devices, allow ...), keeping keys it does not know."),
        ".SH KEYS",
    ]
    heading = None
    rows = 0
    for line in text.splitlines():
        match = re.match(r"^#{2,3}\s+(.*)$", line)
        if match:
            heading = match.group(1).strip()
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else []
        if len(cells) < 2:
            continue
        key = re.match(r"^`([^`]+)`$", cells[0])
        if not key:
            continue
        if heading:
            out.append(".SS %s" % esc(re.sub(r"[`*]", "", heading)))
            heading = None
        out.append(".TP")
        out.append("\\fB%s\\fR" % esc(key.group(1)))
        rest = [re.sub(r"\*\*|`", "", c) for c in cells[1:] if c]
        out.append(esc(" \u2014 ".join(rest)).replace("\u2014", "\\(em"))
        rows += 1
    if rows == 0:
        sys.exit("manpage.py: docs/settings.md has no key tables (rows whose first cell is a `key`)")
    out += [
        ".SH FILES",
        "/var/lib/busymate/group/settings.json",
        ".SH SEE ALSO",
        ".BR busymate (1),",
        ".BR busymate-app (8)",
        ".PP",
        "/usr/share/doc/busymate/README.md",
    ]
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("page", choices=["cli", "settings"])
    parser.add_argument("--version", required=True)
    args = parser.parse_args()
    sys.stdout.write(cli(args.version) if args.page == "cli" else settings(args.version))


if __name__ == "__main__":
    main()
