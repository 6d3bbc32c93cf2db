from netbench.cli import main

main()
