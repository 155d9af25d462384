#include "tests/placer/test_certificates.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>

namespace placer::test {
namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "test certificates: %s failed\n", what);
    std::abort();
  }
}

EVP_PKEY* NewKey() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  Check(key != nullptr, "EVP_EC_gen");
  return key;
}

void AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &context, nid, value);
  Check(ext != nullptr, "X509V3_EXT_conf_nid");
  Check(X509_add_ext(cert, ext, -1) == 1, "X509_add_ext");
  X509_EXTENSION_free(ext);
}

X509* NewCertificate(EVP_PKEY* key, const std::string& common_name,
                     int serial) {
  X509* cert = X509_new();
  Check(cert != nullptr, "X509_new");
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(
      name, "CN", MBSTRING_ASC,
      reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0);
  return cert;
}

void WritePem(const std::string& path, X509* cert, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  Check(f != nullptr, "fopen");
  if (cert != nullptr) Check(PEM_write_X509(f, cert) == 1, "PEM_write_X509");
  if (key != nullptr) {
    Check(PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) ==
              1,
          "PEM_write_PrivateKey");
  }
  std::fclose(f);
}

}  // namespace

TestCertificateAuthority::TestCertificateAuthority(const std::string& dir,
                                                   const std::string& name)
    : dir_(dir), name_(name), ca_file_(dir + "/" + name + ".ca.pem") {
  EVP_PKEY* key = NewKey();
  X509* cert = NewCertificate(key, name + " test CA", serial_++);
  X509_set_issuer_name(cert, X509_get_subject_name(cert));
  AddExtension(cert, cert, NID_basic_constraints, "critical,CA:TRUE");
  AddExtension(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExtension(cert, cert, NID_subject_key_identifier, "hash");
  Check(X509_sign(cert, key, EVP_sha256()) > 0, "X509_sign (CA)");
  WritePem(ca_file_, cert, nullptr);
  key_ = key;
  cert_ = cert;
}

TestCertificateAuthority::~TestCertificateAuthority() {
  X509_free(static_cast<X509*>(cert_));
  EVP_PKEY_free(static_cast<EVP_PKEY*>(key_));
}

PemFiles TestCertificateAuthority::IssueServer(const std::string& name) {
  return Issue(name, /*server=*/true);
}

PemFiles TestCertificateAuthority::IssueClient(const std::string& common_name) {
  return Issue(common_name, /*server=*/false);
}

PemFiles TestCertificateAuthority::Issue(const std::string& common_name,
                                         bool server) {
  X509* issuer = static_cast<X509*>(cert_);
  EVP_PKEY* key = NewKey();
  X509* cert = NewCertificate(key, common_name, serial_++);
  X509_set_issuer_name(cert, X509_get_subject_name(issuer));
  AddExtension(cert, issuer, NID_basic_constraints, "critical,CA:FALSE");
  AddExtension(cert, issuer, NID_authority_key_identifier, "keyid");
  if (server) {
    AddExtension(cert, issuer, NID_subject_alt_name,
                 "DNS:localhost,IP:127.0.0.1");
    AddExtension(cert, issuer, NID_ext_key_usage, "serverAuth");
  } else {
    AddExtension(cert, issuer, NID_ext_key_usage, "clientAuth");
  }
  Check(X509_sign(cert, static_cast<EVP_PKEY*>(key_), EVP_sha256()) > 0,
        "X509_sign");
  const std::string base = dir_ + "/" + name_ + "." + common_name;
  PemFiles files{base + ".cert.pem", base + ".key.pem"};
  WritePem(files.certificate, cert, nullptr);
  WritePem(files.private_key, nullptr, key);
  X509_free(cert);
  EVP_PKEY_free(key);
  return files;
}

}  // namespace placer::test
