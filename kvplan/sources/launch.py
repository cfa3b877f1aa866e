"""Launch commands as input: `vllm serve ...`, `python -m sglang.launch_server ...`,
`llama-server ...`, `trtllm-serve ...`, `text-generation-launcher ...`, as typed, inside a
`docker run ...` line, or as a container's `command:`/`args:` lists (Kubernetes YAML or JSON).

This module only reads text: it finds the engine's program, unwraps Docker and env-var
prefixes, and reads flags through a table the engine supplies (`LAUNCH` in each
kvplan.engines module: flag -> the deployment setting it sets and how to read its value).
Flags the table marks as not affecting memory are ignored; flags it does not know are
reported, since they might. An options file the text itself writes with a here-document
(`cat > extra.yml <<EOF`, then TensorRT-LLM's `--extra_llm_api_options extra.yml`) is read
through the engine's table of its keys.

Never runs anything: the text is split with shlex (POSIX shell words), nothing is evaluated.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import field, replace
from typing import Any

from kvplan.core.errors import BadInputError
from kvplan.core.launch import EngineLaunch
from kvplan.core.patterns import lazy
from kvplan.core.record import record

MAX_COMMAND_CHARS = 64 * 1024  # a launch line or a container spec; real ones are < 2 KB

@record
class Launch:
    engine: str
    program: str  # the words that started it, e.g. "vllm serve"
    settings: dict[str, Any]  # deployment setting -> value
    image: str | None = None  # the Docker image, when wrapped in docker run
    image_version: str | None = None  # the image tag when it is a version (v0.10.1 -> 0.10.1)
    unknown_flags: tuple[str, ...] = ()  # not in the engine's table: might affect memory
    ignored_flags: tuple[str, ...] = ()  # known not to affect memory
    env: dict[str, str] = field(default_factory=dict)  # VAR=value prefixes and docker -e
    # ${VAR:-default} words read as their default: VAR is not set in the text (the serving
    # machine's environment may set it)
    defaults: tuple[str, ...] = ()
    # keys of an options file the text writes (EngineLaunch.option_files) that the engine's
    # table does not know, as "KEY in FILE": they might affect memory
    unknown_options: tuple[str, ...] = ()


# docker/podman run options that take a value (the image is the first word after them)
_DOCKER_VALUE_OPTIONS = frozenset({
    "-p", "--publish", "-v", "--volume", "-e", "--env", "--env-file", "--name", "--gpus",
    "--shm-size", "--ipc", "--runtime", "--network", "--net", "-w", "--workdir", "--entrypoint",
    "--mount", "--ulimit", "--device", "--cpus", "--memory", "-m", "-u", "--user", "--label",
    "-l", "--restart", "--platform", "--hostname", "-h", "--cap-add", "--cap-drop",
    "--security-opt", "--add-host", "--dns", "--log-driver", "--log-opt", "--pull",
    "--memory-swap", "--cpuset-cpus", "--group-add", "--tmpfs", "--pid", "--uts",
})
# apptainer/singularity run and exec options that take a value
_APPTAINER_VALUE_OPTIONS = frozenset({"-B", "--bind", "--env", "--env-file", "-H", "--home",
                                      "-W", "--workdir", "--mount", "-o", "--overlay",
                                      "--pwd", "--security", "--network"})
_ENV_WORD = lazy(r"^[A-Za-z_][A-Za-z0-9_]*=")
# commands that run the rest of the line as a program
_WRAPPERS = frozenset({"sudo", "nohup", "exec", "time", "nice"})
_VERSION_TAG = lazy(r"^v?(\d+\.\d+(?:\.\d+)?)")


def command_words(text: str) -> list[str]:
    """The shell words of a launch line, or of a container spec's command + args lists."""
    if len(text) > MAX_COMMAND_CHARS:
        raise BadInputError(f"the launch command is {len(text):,} characters; at most "
                            f"{MAX_COMMAND_CHARS:,} are read")
    stripped = text.strip()
    if not stripped:
        raise BadInputError("--from-command is empty", "give the line that starts the engine, "
                            "e.g. \"vllm serve meta-llama/Llama-3.1-8B-Instruct --tp 2\"")
    if "\\" in stripped and _WINDOWS_PATH.search(stripped):
        # a Windows line (.\llama.cpp\llama-server.exe -m models\x.gguf, C:\Users\...): its
        # backslashes inside a word separate a path, which a POSIX shell would drop
        stripped = _WINDOWS_SEPARATOR.sub("/", stripped)
    # each pattern only where the words it needs are in the text (a plain launch line, the
    # usual case, then compiles none of the three)
    if stripped[0] in "[{" or (("command" in stripped or "args" in stripped)
                               and re.search(r"^\s*(command|args)\s*:", stripped, re.M)):
        listed = _container_words(stripped)
        if listed is not None:
            return listed
    if ("CMD" in stripped or "ENTRYPOINT" in stripped) and _DOCKERFILE.search(stripped):
        return _dockerfile_words(stripped)
    if "<<" in stripped:
        stripped = _here_documents(stripped)[0]  # a file's text is no command
    # a line continuation as pasted: a backslash, maybe blanks an editor left after it, the
    # line's end (in a shell the blanks would end the command; no one means that in a post)
    joined = _CONTINUATION.sub(" ", stripped) if "\n" in stripped else stripped
    words: list[str] = []
    for line in _shell_lines(joined):
        try:
            found = shlex.split(line, comments=True)
        except ValueError as exc:
            raise BadInputError(f"cannot split the launch command: {exc}",
                                "check its quotes") from None
        # a blank word (`\ ` left before a line break, as vllm serve \ \ was posted) is no
        # argument anyone means
        found = [w for w in found if w.strip()]
        if found and found[0].startswith("-") and words[-1:] == [";"]:
            words.pop()  # a line of flags goes on the command above it (a lost backslash)
        if found:
            words.extend([*found, ";"])
    return _shell_command(words[:-1])


# a Windows path in a command: a drive (C:\), a relative start (.\ or ..\), or a program
# with its .exe; and a backslash inside such a word (between two characters of a name)
_WINDOWS_PATH = lazy(r"(?:^|[\s\"'=])(?:[A-Za-z]:\\|\.{1,2}\\|[\w.\\-]+\\[\w.-]+\.exe\b)")
_WINDOWS_SEPARATOR = lazy(r"(?<=[\w.:-])\\(?=[\w.-])")


# a Dockerfile: an instruction line that starts its command (ENTRYPOINT/CMD in exec form, a
# JSON list, or shell form)
_DOCKERFILE = lazy(r"^\s*(?:CMD|ENTRYPOINT)\s*\[", re.M)


def _dockerfile_words(text: str) -> list[str]:
    """A Dockerfile's command as a docker run line's words: `docker run -e VAR=value IMAGE`
    (its FROM and ENV) then ENTRYPOINT and CMD, each a JSON list (exec form) or a shell string
    (run by /bin/sh -c). Comment lines inside a continued instruction are dropped, as Docker
    drops them."""
    import json

    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    joined = _CONTINUATION.sub(" ", "\n".join(lines))
    image: str | None = None
    env: list[str] = []
    parts: dict[str, list[str]] = {}
    for line in joined.splitlines():
        keyword, _, rest = line.strip().partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM" and rest:
            image = rest.split()[0]
        elif keyword == "ENV" and rest:
            pairs = rest.split() if "=" in rest.split()[0] else [rest.replace(" ", "=", 1)]
            env.extend(w for pair in pairs if "=" in pair for w in ("-e", pair.strip("\"'")))
        elif keyword in ("CMD", "ENTRYPOINT") and rest:
            if rest.startswith("["):
                try:
                    value = json.loads(rest)
                except ValueError:
                    raise BadInputError(f"the Dockerfile's {keyword} is not a JSON list of "
                                        "words", "check its quotes and commas") from None
                if not isinstance(value, list):
                    raise BadInputError(f"the Dockerfile's {keyword} is not a list of words")
                parts[keyword] = [str(w) for w in value]
            else:
                parts[keyword] = ["/bin/sh", "-c", rest]
    words = [*parts.get("ENTRYPOINT", []), *parts.get("CMD", [])]
    return ["docker", "run", *env, image, *words] if image else words


# a line continuation: bash's backslash, cmd's caret, PowerShell's backtick
_CONTINUATION = lazy(r"[\\^`][ \t]*\r?\n")

# a here-document that writes a file: `cat > FILE <<EOF`, `cat <<'EOF' > FILE`, `tee FILE
# <<-EOF`; the body is the lines up to the one that is the delimiter alone
_HERE_DOC = lazy(r"<<-?[ \t]*(['\"]?)([A-Za-z_]\w*)\1")
_HERE_TARGET = lazy(r"(?:^|[\s;&|])(?:cat\b[^<>\n]*?>>?|tee(?:[ \t]+-a)?)[ \t]*([^\s<>;&|'\"]+)"
                    r"|>>?[ \t]*([^\s<>;&|'\"]+)")


def _here_documents(text: str) -> tuple[str, dict[str, str]]:
    """The text without its here-documents' bodies, and the files they write: the target as
    written (`$VAR` unexpanded) -> the body. A here-document whose command writes no file
    (`python - <<EOF`) is dropped from the text too: it is the program's input, not words."""
    out: list[str] = []
    files: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        found = _HERE_DOC.search(line) if "<<" in line else None
        if found is None:
            out.append(line)
            continue
        # the command stays without its `<<EOF` (read again, as a `bash -c` string is, it
        # takes no body a second time)
        out.append(line[:found.start()] + line[found.end():])
        tag, body = found.group(2), []
        while i < len(lines) and lines[i].strip() != tag:
            body.append(lines[i])
            i += 1
        i += 1  # the delimiter's line
        target = _HERE_TARGET.search(line)
        if target is not None:
            files[target.group(1) or target.group(2)] = "\n".join(body)
    return "\n".join(out), files


def _shell_lines(text: str) -> list[str]:
    """The text's commands, one a line as a shell reads a script (`export A=1` on one line, the
    command on the next); a quoted word that spans lines (a JSON object written over several)
    keeps its lines together."""
    lines: list[str] = []
    for line in text.splitlines():
        if lines and _open_quote(lines[-1]):
            lines[-1] += "\n" + line
        else:
            lines.append(line)
    return lines


def _open_quote(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return True
    return False


# what ends the command in a shell line (a pipe, a list, running it in the background)
_SHELL_ENDS = frozenset({"|", "||", "&&", ";", "&", "|&"})
# a redirection: `> log`, `2>&1`, `&> log`, `>>log`, `< in` (the operator alone takes the
# next word as its target)
_REDIRECT = lazy(r"^(\d*(>>?|<)(&\d)?|&>>?)(.*)$")


def _shell_command(words: list[str]) -> list[str]:
    """The words without the shell's redirections (`> vllm.log 2>&1`, `&>log`, `< in`, the
    operator alone taking the next word as its target); `|`, `;`, `&&` and `&` stay as words
    that end a command (`_segments`). A flag's value that is a lone `>` would be dropped: no
    engine flag takes one."""
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        found = _REDIRECT.match(word)
        if found:
            skip = not found.group(4) and not found.group(3)
            continue
        out.append(word)
    return out


def _segments(words: list[str]) -> list[list[str]]:
    """The commands of a shell line, split at `|`, `||`, `&&`, `;`, `&`."""
    found: list[list[str]] = [[]]
    for word in words:
        if word in _SHELL_ENDS:
            found.append([])
        else:
            found[-1].append(word)
    return [seg for seg in found if seg]


def _container_words(text: str) -> list[str] | None:
    """A Kubernetes/compose container (`command:` and `args:` lists) or a JSON word list."""
    from kvplan.sources.reader import parse_yaml

    data = parse_yaml(text, "the launch command")
    found: list[str] = []
    # the container's image and environment, as a docker run line gives them (the image's
    # entrypoint is the engine's program when the command is only its arguments)
    image: list[str] = []

    def visit(node: Any, depth: int = 0) -> bool:
        if depth > 16:
            return False
        if isinstance(node, list) and node and all(isinstance(w, (str, int, float))
                                                   for w in node):
            found.extend(str(w) for w in node)
            return True
        if isinstance(node, dict):
            if "command" in node or "args" in node:
                if isinstance(node.get("image"), str):
                    image.extend(["docker", "run", *_container_env(node.get("env")),
                                  *_container_env(node.get("environment")), node["image"]])
                for key in ("command", "args"):
                    value = node.get(key)
                    if isinstance(value, str):
                        try:
                            found.extend(shlex.split(value))
                        except ValueError as exc:  # an unbalanced quote
                            raise BadInputError(
                                f"cannot split the container's `{key}:` string: {exc}",
                                f"check its quotes, or write `{key}:` as a list of words"
                            ) from None
                    elif isinstance(value, list):
                        found.extend(str(w) for w in value)
                return True
            return any(visit(v, depth + 1) for v in node.values())
        if isinstance(node, list):
            return any(visit(v, depth + 1) for v in node)
        return False

    return [*image, *found] if visit(data) and found else None


def _container_env(env: Any) -> list[str]:
    """A container's environment as docker run's `-e` words: Kubernetes' list of
    {name, value}, compose's list of VAR=value or its mapping."""
    pairs: list[str] = []
    if isinstance(env, dict):
        pairs = [f"{k}={v}" for k, v in env.items() if isinstance(k, str)]
    elif isinstance(env, list):
        for item in env:
            if isinstance(item, dict) and isinstance(item.get("name"), str) and "value" in item:
                pairs.append(f"{item['name']}={item['value']}")
            elif isinstance(item, str) and "=" in item:
                pairs.append(item)
    return [w for pair in pairs for w in ("-e", pair)]


def _unwrap(words: list[str], engines: Sequence[EngineLaunch]
            ) -> tuple[list[str], str | None, dict[str, str]]:
    """Strip VAR=value prefixes and a docker/podman run wrapper: (words, image, env)."""
    env: dict[str, str] = {}
    i = 0
    # sudo (and its options: -u USER, -E, ...) and the wrappers that run the next word
    while i < len(words) and words[i] in _WRAPPERS:
        sudo = words[i] == "sudo"
        i += 1
        while sudo and i < len(words) and words[i].startswith("-"):
            i += 2 if words[i] in ("-u", "-g", "-C", "-h", "-p") else 1
    while i < len(words) and _ENV_WORD.match(words[i]):
        key, _, value = words[i].partition("=")
        env[key] = value
        i += 1
    words = words[i:]
    if words[:1] == ["env"]:
        return _unwrap(words[1:], engines)
    if len(words) >= 2 and words[0] in ("docker", "podman", "nvidia-docker") and \
            words[1] == "run":
        j = 2
        while j < len(words) and words[j].startswith("-"):
            option, eq, value = words[j].partition("=")
            if option in ("-e", "--env"):
                text = value if eq else (words[j + 1] if j + 1 < len(words) else "")
                key, _, val = text.partition("=")
                if key:
                    env[key] = val
            j += 1 if eq or option not in _DOCKER_VALUE_OPTIONS else 2
        if j >= len(words):
            raise BadInputError("the docker run line names no image")
        return words[j + 1:], words[j], env
    if len(words) >= 2 and words[0] in ("apptainer", "singularity") and \
            words[1] in ("run", "exec"):
        # apptainer run --nv [-B a:b] IMAGE [command]: a docker:// image names the engine's
        j = 2
        while j < len(words) and words[j].startswith("-"):
            option, eq, value = words[j].partition("=")
            if option in ("--env", "--env-file") and not eq and j + 1 < len(words):
                key, _, val = words[j + 1].partition("=")
                env[key] = val
            j += 1 if eq or option not in _APPTAINER_VALUE_OPTIONS else 2
        if j < len(words):
            return words[j + 1:], words[j].removeprefix("docker://"), env
    return words, None, env


def _image_engine(image: str, engines: Sequence[EngineLaunch]) -> EngineLaunch | None:
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    for eng in engines:
        if any(repo == name or repo.endswith("/" + name) or repo.endswith(name)
               for name in eng.images):
            return eng
    return None


def _image_version(image: str | None) -> str | None:
    if not image or ":" not in image.rsplit("/", 1)[-1]:
        return None
    m = _VERSION_TAG.match(image.rsplit(":", 1)[1])
    return m.group(1) if m else None


# what may follow a program's name in a build or fork of it: llama-server-cuda,
# llama-server.exe, llama-server_avx2 (the flags decide whether it is read as the engine)
_BINARY_SUFFIX = lazy(r"^[-_.][A-Za-z0-9][A-Za-z0-9_.+-]*$")


def _names_program(word: str, name: str) -> bool:
    """Whether a command's first word runs the program `name`: the same file name under any
    directory (./build/bin/llama-server, ik_llama.cpp's build), or that name with a build
    suffix (llama-server-cuda). Only programs named by a file, never flags like `-m`."""
    base = word.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    if base == name:
        return True
    return not name.startswith("-") and base.startswith(name) and \
        bool(_BINARY_SUFFIX.match(base[len(name):]))


def _find_program(words: list[str], engines: Sequence[EngineLaunch]
                  ) -> tuple[EngineLaunch, int, str, tuple[str, ...]] | None:
    """The engine whose program appears in the words, where its arguments start, the words
    that named it and the program as its table spells it. An exact name anywhere wins over a
    build-suffixed one."""
    for exact in (True, False):
        for start in range(len(words)):
            for eng in engines:
                for program in eng.programs:
                    n = len(program)
                    window = words[start:start + n]
                    if len(window) < n or window[1:] != list(program[1:]):
                        continue
                    first = window[0].rsplit("/", 1)[-1]
                    if first == program[0] if exact else _names_program(window[0], program[0]):
                        named = " ".join(program) if first == program[0] else \
                            f"{first} (read as {program[0]})"
                        return eng, start + n, named, program
    return None


_SHELLS = frozenset({"sh", "bash", "zsh", "dash"})


def _shell_c(words: list[str]) -> list[list[str]]:
    """A command that runs a shell on a string (`bash -c 'vllm serve ...'`, a container's
    `command: ["/bin/sh", "-c", "..."]`) as the commands of that string, each after the words
    before the shell (its env prefix or docker run); any other command as it is."""
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] in _SHELLS and i + 2 < len(words) and \
                re.fullmatch(r"-[a-z]*c", words[i + 1]):
            inner = _segments(command_words(words[i + 2]))
            return [words[:i] + seg for seg in inner] or [words[:i]]
    return [words]


# a shell parameter: $NAME, ${NAME}, ${NAME:-default} or ${NAME-default} (positional and
# special parameters, $1 or $@, are no NAME and stay as written)
_PARAMETER = lazy(r"\$(?:\{([A-Za-z_]\w*)(?:(:?-)([^}]*))?\}|([A-Za-z_]\w*))")


class _Variables:
    """The shell variables a launch text sets before its command (`MODEL=...` or `export
    MODEL=...` on a line above it), put into later words as the shell would: `$MODEL`,
    `${MODEL}`, and `${VAR:-default}` (`${VAR-default}`), which is its default where the text
    does not set VAR (noted in `defaults`, as the serving machine's environment may). A
    variable the text does not set stays as written: kvplan does not guess it. What the
    substitutions add over the whole text is bounded as the text itself is (`A=$A$A` line
    after line, or many `$A` words, would otherwise double it without end)."""

    def __init__(self) -> None:  # a plain class: a dataclass costs start-up for no gain here
        self.assigned: dict[str, str] = {}
        self.defaults: list[str] = []
        self.grown = 0

    def expand(self, word: str) -> str:
        if "$" not in word:
            return word

        def put(m: re.Match[str]) -> str:
            name = m.group(1) or m.group(4)
            if name in self.assigned and (m.group(2) != ":-" or self.assigned[name]):
                value = self.assigned[name]
            elif m.group(2):  # ${VAR:-default}: the shell's value when VAR is unset
                value = self.expand(m.group(3))
                self.defaults.append(f"{name} is not set in the command: read as its default "
                                     f"{value!r} (${{{name}{m.group(2)}...}})")
            else:
                return m.group(0)
            self.grown += len(value)
            if self.grown > MAX_COMMAND_CHARS:
                raise BadInputError(f"the shell variables of the launch command expand to more "
                                    f"than {MAX_COMMAND_CHARS:,} characters (at {name})",
                                    "give the command with its values written out")
            return value

        return _PARAMETER.sub(put, word)


def _command_of(words: list[str], engines: Sequence[EngineLaunch], shell: _Variables
                ) -> tuple[list[str], str | None, dict[str, str]]:
    """The command of a shell line that starts an engine (`source venv/bin/activate && vllm
    serve ...`, `vllm serve ... | tee log`), unwrapped: the first that names a program by its
    exact name, else the first that names one with a build suffix or runs an engine's image,
    else the first command. The shell variables the text sets before it are put into it
    (`_Variables`; the defaults it takes are noted there)."""
    commands: list[tuple[list[str], str | None, dict[str, str]]] = []
    exported = shell.assigned  # `export VAR=value` (or a bare VAR=value) lines before it
    for seg in _segments(words):
        assigns = seg[1:] if seg[0] == "export" else seg
        if all(_ENV_WORD.match(w) for w in assigns):
            for w in assigns:
                key, _, value = w.partition("=")
                exported[key] = shell.expand(value)
            continue
        seg = [shell.expand(w) for w in seg]
        for inner in _shell_c(seg):
            unwrapped, image, env = _unwrap(inner, engines)
            commands.append((unwrapped, image, {**exported, **env}))
    commands = commands or [([], None, {})]
    named = [(c, _find_program(c[0], engines)) for c in commands]
    for c, found in named:
        if found is not None and "(read as" not in found[2]:
            return c
    for c, found in named:
        if found is not None or (c[1] is not None and _image_engine(c[1], engines)):
            return c
    return commands[0]


def parse_launch(text: str, engines: Sequence[EngineLaunch]) -> Launch:
    """Read a launch command with the engines' flag tables. Raises BadInputError when no
    engine's program is found, or a flag's value cannot be read (naming the flag)."""
    shell = _Variables()
    words, image, env = _command_of(command_words(text), engines, shell)
    found = _find_program(words, engines)
    if found is not None:
        eng, start, program, spelled = found
        if spelled in eng.program_flags:
            # the program's own flags join the engine's (Ollama's runner: llama.cpp's context
            # flags, which `ollama serve` does not take)
            eng = replace(eng, flags={**eng.flags, **eng.program_flags[spelled]})
    elif image is not None and (eng_ := _image_engine(image, engines)) is not None:
        eng, start, program = eng_, 0, f"{image} (entrypoint)"
        # an image whose entrypoint is the program's first word (vllm/vllm-openai runs `vllm`)
        # given the rest of it as its first arguments (`serve MODEL ...`)
        for words_of in eng.programs:
            if len(words_of) > 1 and words[:len(words_of) - 1] == list(words_of[1:]):
                start = len(words_of) - 1
                break
    else:
        names = sorted({" ".join(p).lstrip("-m ") for e in engines for p in e.programs})
        if words[:1] and words[0].startswith("-"):
            raise BadInputError(
                f"the launch command starts with the flag {words[0]}, not a program: kvplan "
                "cannot tell which engine it is for",
                "put the program before it (vllm serve MODEL ..., llama-server ...) or the "
                "docker image whose entrypoint runs it; kvplan reads: " + ", ".join(names))
        raise BadInputError("no engine's launch program in the command",
                            "kvplan reads: " + ", ".join(names))
    settings, unknown, ignored_flags = read_flags(words[start:], eng)
    ignored = list(ignored_flags)
    unknown_options: list[str] = []
    if eng.option_files and "<<" in text:
        written = {_file_key(shell.expand(k)): v for k, v in _here_documents(text)[1].items()}
        for setting, keys in eng.option_files.items():
            path = settings.get(setting)
            body = written.get(_file_key(path)) if isinstance(path, str) else None
            if body is None:
                continue  # a file the text does not write: its setting is named, not read
            from_file, ignored_keys, unknown_keys = _read_option_file(body, str(path), keys)
            settings.pop(setting)
            settings.update(from_file)
            ignored.extend(ignored_keys)
            unknown_options.extend(unknown_keys)
    for var, (setting, kind) in eng.env.items():
        if var in env and setting not in settings and \
                env[var].strip() not in eng.unset_values.get(var, ()):
            settings[setting] = _value(env[var], kind, var)
    # the flags the engine reads from its environment, where the command does not give them
    for var, flag in _env_flags(eng).items():
        if var in env:
            try:
                from_env, _, _ = read_flags([f"{flag}={env[var]}"], eng)
            except BadInputError as exc:
                raise BadInputError(f"{var}={env[var]!r} (the engine reads it as {flag}): "
                                    f"{exc.message}", exc.hint) from None
            settings.update({k: v for k, v in from_env.items() if k not in settings})
    # the tag is the engine's release only on the engine's own image (a Triton or NGC image's
    # tag, 25.01-vllm-python-py3, numbers that image)
    own = image is not None and _image_engine(image, [eng]) is not None
    return Launch(eng.engine, program, settings, image, _image_version(image) if own else None,
                  unknown, tuple(ignored), env, tuple(dict.fromkeys(shell.defaults)),
                  tuple(unknown_options))


def _file_key(path: str) -> str:
    return path.strip().removeprefix("./")


def _read_option_file(body: str, path: str, keys: Mapping[str, tuple[str, str]]
                      ) -> tuple[dict[str, Any], list[str], list[str]]:
    """An options file's settings by its table (EngineLaunch.option_files), the keys that
    change no memory ("KEY in FILE"), and the keys the table does not know."""
    from kvplan.sources.reader import parse_yaml

    data = parse_yaml(body, path) if body.strip() else {}
    if not isinstance(data, dict):
        raise BadInputError(f"{path}, written by the launch text, is not a YAML mapping of "
                            "options", "write it as key: value lines")
    settings: dict[str, Any] = {}
    ignored: list[str] = []
    unknown: list[str] = []

    def visit(node: dict[Any, Any], prefix: str, depth: int) -> None:
        for name, value in node.items():
            key = f"{prefix}{name}"
            if isinstance(value, dict) and key not in keys and depth < 8:
                visit(value, key + ".", depth + 1)
                continue
            entry = keys.get(key)
            if entry is None:
                unknown.append(f"{key} in {path}")
            elif entry[1] == "ignore":
                ignored.append(f"{key} in {path}")
            elif value is not None:
                settings[entry[0]] = _value(str(value), entry[1], f"{key} in {path}")

    visit(data, "", 0)
    return settings, ignored, unknown


def _env_flags(eng: EngineLaunch) -> dict[str, str]:
    """The environment variables the engine reads as flags: variable -> flag."""
    found = dict(eng.env_flags)
    if eng.flags_from_env:
        found.update({f[2:].replace("-", "_").upper(): f for f in eng.flags
                      if f.startswith("--") and eng.flags[f][1] not in ("ignore", "ignore-flag")})
    return found


def _normalise(flag: str, eng: EngineLaunch) -> str:
    return flag.replace("_", "-") if eng.underscores_match_dashes and flag.startswith("--") \
        else flag


def read_flags(args: Sequence[str], eng: EngineLaunch
               ) -> tuple[dict[str, Any], tuple[str, ...], tuple[str, ...]]:
    """(settings, unknown flags, ignored flags) from an engine's arguments."""
    table = {_normalise(k, eng): v for k, v in eng.flags.items()}
    settings: dict[str, Any] = {}
    unknown: list[str] = []
    ignored: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if not word.startswith("-") or word == "-":
            if eng.positional and eng.positional not in settings:
                settings[eng.positional] = word
            else:
                unknown.append(word)
            i += 1
            continue
        flag, eq, inline = word.partition("=")
        key = _normalise(flag, eng)
        entry = table.get(key)
        if entry is None and eng.abbreviations and key.startswith("--"):
            # argparse resolves a long flag's unambiguous prefix; kvplan only when the prefix
            # begins one flag of its table and no longer known one (else it stays unknown)
            begun = [k for k in table if k.startswith(key)]
            entry = table[begun[0]] if len(begun) == 1 else None
        if entry is None:
            unknown.append(flag)
            # an unknown flag's value (if any) is the next word unless it is another flag
            i += 1 if eq or i + 1 >= len(args) or args[i + 1].startswith("-") else 2
            continue
        setting, kind = entry
        if kind in ("flag", "no-flag", "ignore-flag"):
            # a switch given a value: vLLM's older StoreBoolean switches
            # (--enable-chunked-prefill=false, or `... false`) and argparse's type=bool ones
            said = inline if eq else None
            if not eq and i + 1 < len(args) and args[i + 1].lower() in _BOOLEAN_WORDS:
                said, i = args[i + 1], i + 1
            on = True if said is None else _BOOLEAN_WORDS.get(said.lower())
            if on is None:
                raise BadInputError(f"{flag}={said} in the launch command: a switch takes "
                                    "true or false", f"write {flag} alone, or {flag}=false")
            if kind == "ignore-flag":
                ignored.append(flag)
            else:
                settings[setting] = on == (kind == "flag")
            i += 1
            continue
        if eq:
            value, i = inline, i + 1
        elif kind == "optional" and (i + 1 >= len(args) or args[i + 1].startswith("-")):
            value, i = "on", i + 1
        elif i + 1 < len(args):
            value, i = args[i + 1], i + 2
        else:
            raise BadInputError(f"{flag} in the launch command has no value")
        if kind == "ignore":
            ignored.append(flag)
            continue
        if value.strip() in eng.unset_values.get(key, ()):
            settings.pop(setting, None)  # the engine's own choice, as if the flag were absent
            continue
        if kind == "append" and settings.get(setting):
            settings[setting] = f"{settings[setting]},{value}"  # llama.cpp's -ot, again
            continue
        settings[setting] = _value(value, kind, flag)
    return settings, tuple(unknown), tuple(ignored)


# the words a switch's value may be (argparse's StoreBoolean and type=bool parsers)
_BOOLEAN_WORDS = {"true": True, "false": False, "1": True, "0": False, "yes": True,
                  "no": False, "on": True, "off": False}


def _value(text: str, kind: str, flag: str) -> Any:
    from kvplan.core.units import parse_bytes, parse_tokens

    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            value = float(text)
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError(text)
            return value
        if kind == "tokens":
            return parse_tokens(text, flag)
        if kind == "bytes":
            return parse_bytes(text)
        if kind == "json":
            import json

            value = json.loads(text)
            if not isinstance(value, dict):
                raise ValueError(text)
            return value
    except (ValueError, BadInputError):
        what = {"int": "number", "float": "number", "json": "JSON object",
                "tokens": "token count (4096, 32k, 32K)", "bytes": "size"}.get(kind, kind)
        raise BadInputError(f"{flag} {text!r} in the launch command is not a valid "
                            f"{what}") from None
    return text
