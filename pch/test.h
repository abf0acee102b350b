// Precompiled header of the gcc build for the tests' own objects (made at
// TEST_OPT): pch/lib.h and what nearly every test includes besides.
#ifndef LOGFS_PCH_TEST_H_
#define LOGFS_PCH_TEST_H_

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "pch/lib.h"

#endif  // LOGFS_PCH_TEST_H_
