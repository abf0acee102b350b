#!/bin/sh
# Makes a private CA and the certificates for etcd over TLS with
# client-certificate auth (docs/OPERATIONS.md "etcd over TLS"), with
# OpenSSL's command line tool:
#
#   make-etcd-certs.sh DIR HOST...
#
#   DIR/ca.pem, ca-key.pem            the CA (keep ca-key.pem offline)
#   DIR/member-HOST.pem, -key.pem     one per etcd member HOST (an IP or a
#                                     DNS name, its subject alternative
#                                     name), for its client and peer URLs:
#                                     server and client auth
#   DIR/meta.pem, meta-key.pem        the client certificate of `logfs meta`
#                                     (--etcd_cert_file, --etcd_key_file)
#
# Keys are EC P-256, certificates last 10 years. Keys are mode 0600. Use
# this CA for etcd alone: meta accepts any member certificate it signed
# that names one of the --etcd hosts. Existing files in DIR are kept: run it
# again with more HOSTs to add members signed by the same CA (it needs
# ca-key.pem back for that). Exit 2 on bad usage, 1 if openssl fails (its
# message on stderr).
set -eu
if [ $# -lt 2 ]; then
  echo "usage: $0 DIR HOST..." >&2
  exit 2
fi
dir=$1
shift
days=3650
mkdir -p "$dir"
umask 077

# A key and a certificate signed by the CA: NAME CN SAN EKU.
sign() {
  [ -f "$dir/$1.pem" ] && return 0
  if [ ! -f "$dir/ca-key.pem" ]; then
    echo "$0: $dir/ca-key.pem is missing: put the CA's key back to sign $1.pem" >&2
    exit 1
  fi
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/$1-key.pem" -subj "/CN=$2" -out "$dir/$1.csr" 2>"$dir/openssl.err" ||
    { cat "$dir/openssl.err" >&2; exit 1; }
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\nkeyUsage=critical,digitalSignature\nbasicConstraints=CA:FALSE\n' \
    "$3" "$4" >"$dir/$1.ext"
  openssl x509 -req -in "$dir/$1.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" \
    -CAcreateserial -days "$days" -extfile "$dir/$1.ext" -out "$dir/$1.pem" 2>"$dir/openssl.err" ||
    { cat "$dir/openssl.err" >&2; exit 1; }
  rm -f "$dir/$1.csr" "$dir/$1.ext"
  chmod 0644 "$dir/$1.pem"
}

if [ ! -f "$dir/ca.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/ca-key.pem" -subj "/CN=logfs etcd CA" -days "$days" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$dir/ca.pem" 2>"$dir/openssl.err" || { cat "$dir/openssl.err" >&2; exit 1; }
  chmod 0644 "$dir/ca.pem"
fi
for host in "$@"; do
  host=${host#[}
  host=${host%]}
  case $host in
    *[!0-9.]*) case $host in *:*) san="IP:$host" ;; *) san="DNS:$host" ;; esac ;;
    *) san="IP:$host" ;;
  esac
  sign "member-$host" "$host" "$san" "serverAuth,clientAuth"
done
sign meta "logfs-meta" "DNS:logfs-meta" "clientAuth"
rm -f "$dir/openssl.err"
echo "$dir: ca.pem, $(for h in "$@"; do printf 'member-%s.pem ' "$h"; done)meta.pem"
