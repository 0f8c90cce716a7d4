/* The smallest program, built twice by bench/run: with glibc, linked statically, and with no
 * libc at all (-DNOLIBC). The difference between their spawn times in bench/platform is what
 * glibc's own start-up costs on this machine, before main(). */
#ifdef NOLIBC
#if defined(__x86_64__)
void _start(void)
{
    __asm__ volatile("mov $60, %eax\n\txor %edi, %edi\n\tsyscall");
}
#elif defined(__aarch64__)
void _start(void)
{
    __asm__ volatile("mov x8, #93\n\tmov x0, #0\n\tsvc #0");
}
#else
#error "no raw exit for this architecture"
#endif
#else
int main(void)
{
    return 0;
}
#endif
