/* Placeholder: replaced by the isolation work. */
int main(void)
{
    return 0;
}
