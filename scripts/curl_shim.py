#!/usr/bin/env python3
"""The few curl options the serve smoke tests use (-s -S -o FILE -w '%{http_code}' --max-time N
-H HEADER -d DATA URL), for the GPU machine, whose image has python3 but no curl. Put a `curl`
link to it first on PATH. Exit status 0 on any HTTP answer (as curl without -f), 7 when the
server cannot be reached, 28 on a timeout."""
import socket
import sys
import urllib.error
import urllib.request


def main(argv):
    out, fmt, timeout, data, url, headers = None, None, 300.0, None, None, {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-s", "-S", "-sS", "-Ss"):
            pass
        elif a == "-o":
            i += 1
            out = argv[i]
        elif a == "-w":
            i += 1
            fmt = argv[i]
        elif a == "--max-time":
            i += 1
            timeout = float(argv[i])
        elif a == "-H":
            i += 1
            k, v = argv[i].split(":", 1)
            headers[k.strip()] = v.strip()
        elif a == "-d":
            i += 1
            data = argv[i].encode()
        elif a.startswith("-"):
            sys.stderr.write(f"curl_shim: option {a} is not supported\n")
            return 2
        else:
            url = a
        i += 1
    req = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            code, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        code, body = e.code, e.read()
    except (socket.timeout, TimeoutError):
        return 28
    except (urllib.error.URLError, ConnectionError):
        return 7
    if out == "/dev/null":
        pass
    elif out:
        open(out, "wb").write(body)
    else:
        sys.stdout.buffer.write(body)
    if fmt:
        sys.stdout.write(fmt.replace("%{http_code}", str(code)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
