// core/device.h (parsed once at the edge) and core/file.h (whole-file reads, atomic writes).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "attune/core/device.h"
#include "attune/core/error.h"
#include "attune/core/file.h"

namespace attune {
namespace {

namespace fs = std::filesystem;

TEST(Device, ParsesTheFourSpellingsAndNamesABadValueAndItsField) {
  const std::vector<std::pair<std::string, std::string>> ok = {
      {"auto", "auto"}, {"", "auto"}, {"cpu", "cpu"}, {"cuda", "cuda:0"}, {"cuda:0", "cuda:0"}, {"cuda:3", "cuda:3"}};
  for (const auto& [in, canonical] : ok) {
    EXPECT_EQ(Device::parse(in).str(), canonical) << in;
    EXPECT_EQ(Device::parse(canonical), Device::parse(in)) << in;
  }
  EXPECT_EQ(Device("cpu").kind, Device::Kind::Cpu);
  EXPECT_EQ(Device().kind, Device::Kind::Auto);
  for (const char* bad : {"tpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "CPU", "cuda0"}) {
    try {
      Device::parse(bad);
      FAIL() << bad;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("\"") + bad + "\""), std::string::npos) << e.what();
      const auto* f = dynamic_cast<const NamesField*>(&e);
      ASSERT_NE(f, nullptr);
      EXPECT_EQ(f->field(), "device");
    }
  }
}

TEST(File, ReadsWholeFilesAndWritesAtomically) {
  const fs::path dir = fs::temp_directory_path() / ("attune_file_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string bytes("a\0b\xff\n", 5);
  write_file_atomic(dir / "f.bin", bytes);
  EXPECT_EQ(read_file(dir / "f.bin"), bytes);
  write_file_atomic(dir / "f.bin", "new");  // replaces
  EXPECT_EQ(read_file(dir / "f.bin"), "new");
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "f.bin");  // no temporaries left
  EXPECT_THROW(read_file(dir / "absent"), InputError);
  EXPECT_THROW(read_file(dir), InputError);                               // a directory
  EXPECT_THROW(write_file_atomic(dir / "no" / "such" / "x", "y"), Error);  // cannot write
  try {
    read_file(dir / "absent");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("absent: cannot open"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attune
