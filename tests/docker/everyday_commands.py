"""Everyday commands an agent runs in its workspace, with the exact result
each must give (exit code, stdout, stderr) whatever the container runtime.

Each script runs under ``bash -c`` as the sandbox user in a fresh directory of
its own under /workspace; it prints only what is the same on every correct
Linux (no timestamps, inode numbers, block counts or directory sizes, which
differ between filesystems). The package managers work offline as the
sandbox user on the read-only root: pip into a venv and (outside one) into
$HOME, npm from a local tarball with its cache in $HOME. Missing from the
image, so not listed: make and compilers.
"""

# ruff: noqa: E501  (a table of shell scripts reads best one case per line)

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    id: str
    script: str
    stdout: str
    exit_code: int = 0
    stderr: str = ""
    #: Why this case is a known difference under runsc (run as a strict xfail there).
    runsc_gap: str = ""


LGETXATTR_GAP = (
    "runsc 0.0~20240729 answers lgetxattr(symlink, 'security.selinux') on gofer-backed "
    "mounts (image rootfs, workspace volume) with EBADF, so ls -l prints "
    "'ls: NAME: Bad file descriptor' on stderr for each symlink (listing and exit code are "
    "right); its OCI seccomp ignores errnoRet, so no profile can turn it into ENODATA"
)


# A pure-Python wheel, built by hand offline: METADATA, WHEEL, RECORD and one module.
_MAKE_WHEEL = r"""
import base64, hashlib, zipfile
files = {
    "evpkg/__init__.py": "VALUE = 42\n",
    "evpkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: evpkg\nVersion: 1.0\n",
    "evpkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
def digest(text):
    raw = hashlib.sha256(text.encode()).digest()
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
record = "".join(f"{n},{digest(t)},{len(t.encode())}\n" for n, t in files.items())
files["evpkg-1.0.dist-info/RECORD"] = record + "evpkg-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile("evpkg-1.0-py3-none-any.whl", "w") as whl:
    for name, text in files.items():
        whl.writestr(name, text)
"""

CASES: tuple[Case, ...] = (
    Case("ls-l", "echo hi > f; chmod 640 f; ls -l f | awk '{print $1, $3, $4, $5, $NF}'",
         "-rw-r----- sandbox sandbox 3 f\n"),
    Case("ls-la", "mkdir d; touch d/a d/b; ls -la d | awk 'NR>1 {print $1, $NF}'",
         "drwxr-xr-x .\ndrwxr-xr-x ..\n-rw-r--r-- a\n-rw-r--r-- b\n"),
    Case("ls-R", "mkdir -p a/b; touch a/b/c; ls -R a", "a:\nb\n\na/b:\nc\n"),
    Case("stat", "printf abc > f; stat -c '%n %s %F %a %U %G' f",
         "f 3 regular file 644 sandbox sandbox\n"),
    Case("stat-dir", "mkdir d; stat -c '%F %a' d", "directory 755\n"),
    Case("cp-a", "echo x > f; chmod 600 f; touch -d '2020-01-02 03:04:05Z' f; cp -a f g; "
         "stat -c '%a %Y %U' g", "600 1577934245 sandbox\n"),
    Case("cp-r", "mkdir -p a/b; echo 1 > a/b/c; cp -r a z; cat z/b/c", "1\n"),
    Case("mv", "echo 1 > a; mv a b; ls; cat b", "b\n1\n"),
    Case("rm-rf", "mkdir -p x/y/z; touch x/y/z/f; rm -rf x; ls -A | wc -l", "0\n"),
    Case("mkdir-p", "mkdir -p a/b/c && test -d a/b/c && echo ok", "ok\n"),
    Case("touch-date", "touch -d '2021-05-06 07:08:09Z' f; date -u -r f +%FT%T",
         "2021-05-06T07:08:09\n"),
    Case("find-printf", "mkdir -p s/t; echo 12 > s/t/f; echo 1 > s/g; "
         "find s -printf '%y %P\\n' | sort; find s -type f -printf '%s %m %P\\n' | sort",
         "d \nd t\nf g\nf t/f\n2 644 g\n3 644 t/f\n"),
    Case("find-newer", "touch -d 2020-01-01 old; touch new; find . -newer old -type f -printf '%P\\n'",
         "new\n"),
    Case("find-exec", "touch a b; find . -type f -exec basename {} \\; | sort", "a\nb\n"),
    Case("tar-cx", "mkdir src; echo hi > src/a; ln -s a src/l; tar czf t.tgz src; mkdir out; "
         "tar xzf t.tgz -C out; cat out/src/a; readlink out/src/l; tar tzf t.tgz | sort",
         "hi\na\nsrc/\nsrc/a\nsrc/l\n"),
    Case("gzip", "seq 1000 > f; gzip -k f; gunzip -c f.gz | wc -l; ls", "1000\nf\nf.gz\n"),
    Case("git-commit-log", "git init -q -b main r && cd r && echo a > a && git add a && "
         "git -c user.name=t -c user.email=t@e commit -qm first && git log --format=%s",
         "first\n"),
    Case("git-status-diff", "git init -q -b main r && cd r && echo a > a && git add a && "
         "git -c user.name=t -c user.email=t@e commit -qm first && echo b > a && touch new && "
         "git status --short && git diff --numstat",
         " M a\n?? new\n1\t1\ta\n"),
    Case("git-branch-merge", "git init -q -b main r && cd r && echo a > a && git add a && "
         "git -c user.name=t -c user.email=t@e commit -qm one && git checkout -q -b feat && "
         "echo b > b && git add b && git -c user.name=t -c user.email=t@e commit -qm two && "
         "git checkout -q main && git merge -q --ff-only feat && git log --format=%s && git ls-files",
         "two\none\na\nb\n"),
    # Models type `python` as often as `python3` (LangChain's sandbox suite does too).
    Case("python-alias", "python -c 'import sys; print(sys.version_info[0])'", "3\n"),
    Case("python-venv", "python3 -m venv --without-pip v && "
         "v/bin/python -c 'import sys; print(sys.prefix != sys.base_prefix)'", "True\n"),
    Case("wheel-install", "python3 -m venv --without-pip v && python3 -c \"$MAKE_WHEEL\" && "
         "site=$(v/bin/python -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))') && "
         "python3 -m zipfile -e evpkg-1.0-py3-none-any.whl \"$site\" && "
         "v/bin/python -c 'import evpkg, importlib.metadata as m; print(evpkg.VALUE, m.version(\"evpkg\"))'",
         "42 1.0\n"),
    Case("venv-pip", "python3 -m venv v && v/bin/pip --version | cut -d' ' -f1 && "
         "pip --version | cut -d' ' -f1 && pip3 --version | cut -d' ' -f1", "pip\npip\npip\n"),
    Case("pip-venv-wheel", "python3 -m venv v && python3 -c \"$MAKE_WHEEL\" && "
         "v/bin/pip install -q --no-index evpkg-1.0-py3-none-any.whl && "
         "v/bin/python -c 'import evpkg, importlib.metadata as m; print(evpkg.VALUE, m.version(\"evpkg\"))' && "
         "v/bin/pip list --format=freeze | grep '^evpkg=='",
         "42 1.0\nevpkg==1.0\n"),
    # Outside a venv pip installs for the user, under $HOME (no PEP 668 refusal:
    # the root is read-only, so the system's packages are safe anyway).
    Case("pip-user-wheel", "python3 -c \"$MAKE_WHEEL\" && "
         "pip install -q --no-index evpkg-1.0-py3-none-any.whl && "
         "python3 -c 'import evpkg, os; print(evpkg.VALUE, evpkg.__file__.startswith(os.environ[\"HOME\"] + \"/.local/\"))'",
         "42 True\n"),
    Case("python-tls-roots", "test -s /etc/ssl/certs/ca-certificates.crt && "
         "python3 -c 'import ssl; print(ssl.create_default_context().cert_store_stats()[\"x509_ca\"] > 100)'",
         "True\n"),
    Case("node-e", "node -e 'console.log([1, 2, 3].map(x => x * 2).join(), typeof require(\"fs\").readFileSync)'",
         "2,4,6 function\n"),
    Case("npm-version", "npm --version | grep -cE '^[0-9]+\\.[0-9]+\\.[0-9]+$'", "1\n"),
    Case("npm-pack-install", "mkdir lib app && cd lib && "
         "printf '{\"name\": \"evlib\", \"version\": \"1.0.0\", \"main\": \"index.js\"}' > package.json && "
         "echo 'module.exports = 42;' > index.js && npm pack --silent && cd ../app && "
         "npm init -y >/dev/null && npm install --silent ../lib/evlib-1.0.0.tgz && "
         "node -e 'console.log(require(\"evlib\"), require(\"./package.json\").dependencies.evlib)' && "
         "test -d \"$HOME/.npm/_cacache\" && echo cache-in-home",
         "evlib-1.0.0.tgz\n42 file:../lib/evlib-1.0.0.tgz\ncache-in-home\n"),
    Case("curl-file", "echo hello > f && curl -sS \"file://$PWD/f\" && curl --version | head -n1 | cut -d' ' -f1",
         "hello\ncurl\n"),
    # No network: wget reports a network failure (exit 4), curl "couldn't connect" (7).
    Case("wget-curl-offline", "wget --version | head -n1 | cut -d' ' -f1,2; "
         "wget -q -O- http://127.0.0.1:9/; echo wget $?; curl -s http://127.0.0.1:9/; echo curl $?",
         "GNU Wget\nwget 4\ncurl 7\n"),
    Case("jq", "echo '{\"a\": [1, 2, {\"b\": \"x\"}]}' | jq -c '.a[2], (.a | length)'",
         '{"b":"x"}\n3\n'),
    Case("zip-unzip", "mkdir -p d/e && echo hi > d/e/f && zip -qr a.zip d && rm -r d && "
         "unzip -q a.zip && cat d/e/f && unzip -Z1 a.zip", "hi\nd/\nd/e/\nd/e/f\n"),
    Case("less", "seq 3 | less", "1\n2\n3\n"),
    Case("pgrep", "sleep 30 & pgrep -x sleep >/dev/null && echo found; kill $!", "found\n"),
    Case("python-subprocess", "python3 -c 'import subprocess; "
         "print(subprocess.run([\"echo\", \"x\"], capture_output=True, text=True).stdout.strip())'",
         "x\n"),
    Case("python-processpool", "python3 -c 'from concurrent.futures import ProcessPoolExecutor as P\n"
         "with P(2) as p: print(sum(p.map(abs, [-1, -2, -3])))'", "6\n"),
    Case("sed-i", "printf 'a\\nb\\n' > f; sed -i 's/b/c/' f; cat f", "a\nc\n"),
    Case("perl-pi", "echo foo > f; perl -pi -e 's/foo/bar/' f; cat f", "bar\n"),
    Case("chmod", "touch f; chmod 751 f; stat -c %a f; chmod u-x,o-x f; stat -c %a f; "
         "chmod -R go-rwx .; stat -c %a f", "751\n650\n600\n"),
    Case("ln-s", "echo t > f; ln -s f l; readlink l; cat l; stat -c '%F %N' l",
         "f\nt\nsymbolic link 'l' -> 'f'\n"),
    Case("ls-l-symlink", "echo t > f; ln -s f l; ls -l l | awk '{print $1, $(NF-2), $(NF-1), $NF}'",
         "lrwxrwxrwx l -> f\n", runsc_gap=LGETXATTR_GAP),
    Case("ln-hard", "echo t > f; ln f h; stat -c %h f", "2\n"),
    Case("mkfifo", "mkfifo p; (echo hi > p &); cat p; stat -c %F p", "hi\nfifo\n"),
    Case("du", "head -c 100000 /dev/zero > f; du -b f; du -s . >/dev/null && echo ok",
         "100000\tf\nok\n"),
    Case("df", "df -P . | awk 'NR == 1 {print $1, $2}'; df -h . >/dev/null && echo ok",
         "Filesystem 1024-blocks\nok\n"),
    Case("ps", "sleep 30 & ps -o comm= -p $!; kill $!", "sleep\n"),
    Case("kill", "sleep 30 & p=$!; kill -TERM $p; wait $p; echo $?", "143\n"),
    Case("timeout", "timeout 1 sleep 5; echo $?", "124\n"),
    Case("sort-uniq", "printf 'b\\na\\nb\\nc\\n' | sort | uniq -c | awk '{print $1, $2}'",
         "1 a\n2 b\n1 c\n"),
    Case("xargs", "printf '1\\n2\\n3\\n' | xargs -P2 -I{} sh -c 'echo n{}' | sort", "n1\nn2\nn3\n"),
    Case("grep-r", "mkdir d; echo needle > d/a; echo hay > d/b; grep -rl needle d; grep -c hay d/b",
         "d/a\n1\n"),
    Case("awk", "printf '1 2\\n3 4\\n' | awk '{s += $2} END {print s}'", "6\n"),
    Case("diff", "echo a > x; echo b > y; diff x y; echo $?", "1c1\n< a\n---\n> b\n1\n"),
    Case("head-tail-wc", "seq 100 > f; head -n 2 f; tail -n 1 f; wc -l < f", "1\n2\n100\n100\n"),
    Case("sha256sum", "printf abc | sha256sum",
         "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  -\n"),
    Case("file", "printf '#!/bin/sh\\necho\\n' > s; file -b s", "POSIX shell script, ASCII text executable\n"),
    Case("id", "id -un; id -u; whoami", "sandbox\n1000\nsandbox\n"),
    Case("mktemp", "t=$(mktemp); test -f \"$t\" && rm \"$t\" && echo ok", "ok\n"),
    Case("flock", "flock lk -c 'echo locked'", "locked\n"),
    # Network none: the loopback answers "refused" for a closed port, the world is unreachable.
    Case("closed-port-python", "python3 -c 'import socket\ntry:\n"
         "    socket.create_connection((\"127.0.0.1\", 9), timeout=3)\n"
         "except OSError as e:\n    print(type(e).__name__)'", "ConnectionRefusedError\n"),
    Case("closed-port-bash", "(exec 3<>/dev/tcp/127.0.0.1/9) 2>/dev/null; echo $?", "1\n"),
    # runc says ENETUNREACH, gVisor's netstack EHOSTUNREACH: both are "no route".
    Case("no-route-python", "python3 -c 'import errno, socket\ntry:\n"
         "    socket.create_connection((\"192.0.2.1\", 80), timeout=3)\n"
         "except OSError as e:\n"
         "    print(e.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH))'", "True\n"),
)  # fmt: skip

#: Environment every case gets (the wheel builder, as a script python3 -c runs).
CASE_ENV = {"MAKE_WHEEL": _MAKE_WHEEL, "TZ": "UTC"}
