// libcrypto.so for civetweb (see CMakeLists.txt here): no code of its own, only OpenSSL 3's
// libcrypto as its dependency, under the name civetweb loads.
