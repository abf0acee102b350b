// Entry points of the logfs subcommands. Each parses its own gflags from
// argv (argv[0] is "logfs <name>") and returns the process exit code.
#pragma once

namespace logfs::main {

int MetaMain(int argc, char** argv);
int SegdMain(int argc, char** argv);
int MountMain(int argc, char** argv);
int UmountMain(int argc, char** argv);
int BenchMain(int argc, char** argv);
int StatusMain(int argc, char** argv);
int FsckMain(int argc, char** argv);
int CheckerMain(int argc, char** argv);
int RecoverMain(int argc, char** argv);

// Shared by the subcommands: parses flags (exits with a one-line error on
// an unknown or bad flag) and sets up glog to stderr.
void InitProcess(int* argc, char*** argv, const char* usage);

}  // namespace logfs::main
