// Empty: the translation unit that dmb_test_pch's precompiled header (the
// system headers every test binary reuses, CMakeLists.txt) is built for.
