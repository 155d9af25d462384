// Certificates made at test time with OpenSSL: a CA, a server certificate
// for localhost and 127.0.0.1, and client certificates by name, written as
// PEM files for the service's TLS tests.
#ifndef PLACER_TESTS_PLACER_TEST_CERTIFICATES_H_
#define PLACER_TESTS_PLACER_TEST_CERTIFICATES_H_

#include <string>

namespace placer::test {

struct PemFiles {
  std::string certificate;  // path of the PEM certificate
  std::string private_key;  // path of its PEM key
};

// A certificate authority with its own EC P-256 key; each call of Issue*
// writes a certificate it signed, valid from an hour ago for a day.
class TestCertificateAuthority {
 public:
  // Writes the CA's certificate as `dir`/`name`.ca.pem (dir must exist).
  TestCertificateAuthority(const std::string& dir, const std::string& name);
  ~TestCertificateAuthority();
  TestCertificateAuthority(const TestCertificateAuthority&) = delete;
  TestCertificateAuthority& operator=(const TestCertificateAuthority&) = delete;

  const std::string& ca_file() const { return ca_file_; }
  // A server certificate for DNS:localhost and IP:127.0.0.1.
  PemFiles IssueServer(const std::string& name);
  // A client certificate whose subject common name is `common_name`.
  PemFiles IssueClient(const std::string& common_name);

 private:
  PemFiles Issue(const std::string& common_name, bool server);
  std::string dir_;
  std::string name_;
  std::string ca_file_;
  void* key_ = nullptr;   // EVP_PKEY*
  void* cert_ = nullptr;  // X509*
  int serial_ = 1;
};

}  // namespace placer::test

#endif  // PLACER_TESTS_PLACER_TEST_CERTIFICATES_H_
