// Entry point of the `joulepipe` command; see src/cli/app.cpp.
int main() { return 0; }
