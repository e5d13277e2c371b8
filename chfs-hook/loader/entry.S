/*
 * entry.S — the machine-level part of the gate.
 *
 * A rewritten site `call *%rax` pushes its return address at (original rsp - 8) — inside the
 * caller's red zone, which cannot be helped with a 2-byte instruction — and lands in the nop
 * sled at VA 0, whose tail does `lea -0x80(%rsp),%rsp` (so nothing we push clobbers the rest of
 * the red zone) and jumps here. So on entry: 0x80(%rsp) is the return address.
 *
 * The kernel preserves every register but rax, rcx and r11 across `syscall`; the C code we call
 * may clobber the SysV caller-saved set, so we save the argument registers (r10 included) and
 * restore them. rt_sigreturn must run with rsp exactly at the signal frame, so it is issued
 * here directly after undoing the 0x88 bytes the trampoline path added.
 */
    .text

    .globl chfs_gate_entry
    .hidden chfs_gate_entry
    .type chfs_gate_entry,@function
chfs_gate_entry:
    cmpq $15, %rax              /* __NR_rt_sigreturn */
    je .Lsigreturn
    pushq %rbx
    pushq %r9
    pushq %r8
    pushq %r10
    pushq %rdx
    pushq %rsi
    pushq %rdi
    pushq %rax                  /* struct chfs_sysargs now at (%rsp) */
    movq %rsp, %rdi
    movq 0xc0(%rsp), %rsi       /* return address: 8 pushes + 0x80 */
    movq %rsp, %rbx
    andq $-16, %rsp             /* SysV alignment for the C dispatcher */
    call chfs_gate_dispatch
    movq %rbx, %rsp
    addq $8, %rsp
    popq %rdi
    popq %rsi
    popq %rdx
    popq %r10
    popq %r8
    popq %r9
    popq %rbx
    leaq 0x80(%rsp), %rsp       /* lea, not add: leave the flags alone */
    ret
.Lsigreturn:
    leaq 0x88(%rsp), %rsp       /* back to the rsp of the original syscall site */
    .globl chfs_sigreturn_site
    .hidden chfs_sigreturn_site
chfs_sigreturn_site:
    syscall
    ud2
    .size chfs_gate_entry, .-chfs_gate_entry

/* long chfs_raw_syscall(nr, a1..a6): the one ordinary kernel entry of the loader. For
 * clone(CLONE_VM) with a new stack the gate has pushed the caller's return address onto the
 * child's stack, so the child's `ret` below goes straight back to the application. */
    .globl chfs_raw_syscall
    .hidden chfs_raw_syscall
    .type chfs_raw_syscall,@function
chfs_raw_syscall:
    movq %rdi, %rax
    movq %rsi, %rdi
    movq %rdx, %rsi
    movq %rcx, %rdx
    movq %r8, %r10
    movq %r9, %r8
    movq 8(%rsp), %r9
    .globl chfs_raw_syscall_site
    .hidden chfs_raw_syscall_site
chfs_raw_syscall_site:
    syscall
    ret
    .size chfs_raw_syscall, .-chfs_raw_syscall

    .section .note.GNU-stack,"",@progbits
